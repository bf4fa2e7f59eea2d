#!/usr/bin/env bash
# Build ferry's .deb (and .rpm) into dist/: the binary (version and commit stamped in),
# man pages from the commands' own help (ferry gen-docs), bash and zsh completions, the
# systemd units of docs/systemd (pointing at /usr/bin/ferry) and a commented
# /etc/ferry/ferry.cnf. Needs nfpm: .ci/run builds it into .bin/ (tools/ci/go.mod).
#   scripts/package.sh            # dist/ferry_VERSION_amd64.deb and dist/ferry-VERSION.x86_64.rpm
#   apt-get install ./dist/ferry_*_amd64.deb
set -euo pipefail
cd "$(dirname "$0")/.."
NFPM=${NFPM:-.bin/nfpm}
[ -x "$NFPM" ] || (cd tools/ci && go build -o ../../.bin/nfpm github.com/goreleaser/nfpm/v2/cmd/nfpm)
version=$(sed -n 's/^var version = "\(.*\)"$/\1/p' cmd/ferry/main.go)
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain 2>/dev/null)" ] || commit="$commit-dirty"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
go build -trimpath -ldflags "-X main.commit=$commit" -o "$stage/ferry" ./cmd/ferry
"$stage/ferry" gen-docs --man "$stage/man" --completions "$stage/completions"
gzip -9n "$stage"/man/*.1
mkdir -p "$stage/systemd"
for u in docs/systemd/*.service docs/systemd/*.timer; do
  sed 's|/usr/local/bin/ferry|/usr/bin/ferry|g' "$u" >"$stage/systemd/$(basename "$u")"
done
{
  echo "# /etc/ferry/ferry.cnf: a commented example of ferry's options (installed by the package)."
  echo "# ferry reads option files as MariaDB's programs do (/etc/mysql/my.cnf and what it includes):"
  echo "# copy this file to /etc/mysql/conf.d/ferry.cnf, or give it with --defaults-file, and"
  echo "# uncomment what you need. docs/operations.md (Option files) has the rules."
  echo "#"
  sed -e 's/^\([^#]\)/# \1/' docs/systemd/ferry.cnf
} >"$stage/ferry.cnf"
mkdir -p dist
sed -e "s|\${FERRY_STAGE}|$stage|g" -e "s|\${FERRY_VERSION}|${version/-dev/~dev}|g" packaging/nfpm.yaml >"$stage/nfpm.yaml"
for p in deb rpm; do
  "$NFPM" package --config "$stage/nfpm.yaml" --packager "$p" --target dist/ >/dev/null
done
ls dist/
