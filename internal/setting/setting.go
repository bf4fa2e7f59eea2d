// Package setting lets library packages name the setting an error is about without
// knowing how the user gave it. An internal/ package says "TLS certificate"; the
// command line renders that as --tls-cert and the Galera SST method as [sst] tcert,
// each with its own table of Names. Without a table, the human name is printed.
package setting

import (
	"fmt"
	"strings"
)

// Setting is one thing a user sets, identified by its human name ("TLS certificate").
// The name is stable: front ends key their tables on these constants.
type Setting string

// String returns the human name.
func (s Setting) String() string { return string(s) }

// The settings library errors name. Keep each a short noun phrase that reads in a
// sentence; a front end that gives the setting another way maps it in its Names.
const (
	Compress               Setting = "compression"
	CompressLevel          Setting = "compression level"
	Databases              Setting = "databases"
	Datadir                Setting = "datadir"
	DataDirectoryMap       Setting = "DATA DIRECTORY map"
	DefaultsFile           Setting = "option file"
	EncryptTo              Setting = "age recipient"
	EncryptToFile          Setting = "age recipients file"
	Exclude                Setting = "excluded tables"
	FlushInterval          Setting = "flush interval"
	From                   Setting = "donor address"
	Galera                 Setting = "Galera restore"
	Heartbeat              Setting = "heartbeat"
	Host                   Setting = "server host"
	IdentityFile           Setting = "age identity file"
	IncrementalBasedir     Setting = "incremental base directory"
	IncrementalDir         Setting = "incremental directory"
	KeepCalendar           Setting = "daily, weekly, monthly or yearly backups to keep"
	TrustKey               Setting = "trusted signing key"
	KeepDays               Setting = "days to keep"
	KeepLast               Setting = "backups to keep"
	KeyFile                Setting = "key file"
	KeyPasswordFile        Setting = "key password file"
	LockDays               Setting = "Object Lock retention days"
	LockMode               Setting = "Object Lock mode"
	Mariadbd               Setting = "mariadbd binary"
	MaxImpact              Setting = "impact limit"
	MaxMemory              Setting = "memory limit"
	MaxRate                Setting = "rate limit"
	MaxSpool               Setting = "redo spool limit"
	MergeEvery             Setting = "merge interval"
	MergeSize              Setting = "merge size"
	MetricsFile            Setting = "metrics file"
	MetricsListen          Setting = "metrics address"
	Move                   Setting = "file move"
	NoDataDirectory        Setting = "DATA DIRECTORY override"
	Owner                  Setting = "datadir owner"
	Parallel               Setting = "parallelism"
	PartSize               Setting = "part size"
	PasswordFile           Setting = "password file"
	Port                   Setting = "server port"
	RenameTo               Setting = "new table name"
	Replace                Setting = "datadir replacement"
	ReplaceTables          Setting = "table replacement"
	Replicate              Setting = "replication setup"
	ReplicateFromSource    Setting = "replication from the source"
	ReplPasswordFile       Setting = "replication password file"
	ReplUser               Setting = "replication user"
	Repo                   Setting = "repository"
	CopySource             Setting = "source repository"
	CopyTarget             Setting = "target repository"
	Resume                 Setting = "resume"
	RetryMax               Setting = "retry limit"
	S3CAFile               Setting = "S3 CA file"
	S3Endpoint             Setting = "S3 endpoint"
	S3PathStyle            Setting = "S3 addressing style"
	S3Region               Setting = "S3 region"
	SafeSlaveBackup        Setting = "safe replica backup"
	SafeSlaveBackupTimeout Setting = "safe replica backup timeout"
	SegmentSize            Setting = "segment size"
	SlaveInfo              Setting = "replica coordinates"
	Socket                 Setting = "server socket"
	Start                  Setting = "replica start"
	StreamFile             Setting = "stream file"
	Tables                 Setting = "tables"
	TargetDir              Setting = "target directory"
	TLSCA                  Setting = "TLS CA"
	TLSCert                Setting = "TLS certificate"
	TLSKey                 Setting = "TLS key"
	TLSServerName          Setting = "TLS server name"
	Tmpdir                 Setting = "temporary directory"
	ToGTID                 Setting = "target GTID"
	TokenFile              Setting = "token file"
	ToTime                 Setting = "target time"
	UseMemory              Setting = "recovery memory"
	User                   Setting = "user name"
)

// All returns every setting, for front ends to check their tables are complete.
func All() []Setting {
	return []Setting{
		Compress,
		CompressLevel,
		Databases,
		Datadir,
		DataDirectoryMap,
		DefaultsFile,
		EncryptTo,
		EncryptToFile,
		Exclude,
		FlushInterval,
		From,
		Galera,
		Heartbeat,
		Host,
		IdentityFile,
		IncrementalBasedir,
		IncrementalDir,
		KeepCalendar,
		TrustKey,
		KeepDays,
		KeepLast,
		KeyFile,
		KeyPasswordFile,
		LockDays,
		LockMode,
		Mariadbd,
		MaxImpact,
		MaxMemory,
		MaxRate,
		MaxSpool,
		MergeEvery,
		MergeSize,
		MetricsFile,
		MetricsListen,
		Move,
		NoDataDirectory,
		Owner,
		Parallel,
		PartSize,
		PasswordFile,
		Port,
		RenameTo,
		Replace,
		ReplaceTables,
		Replicate,
		ReplicateFromSource,
		ReplPasswordFile,
		ReplUser,
		Repo,
		CopySource,
		CopyTarget,
		Resume,
		RetryMax,
		S3CAFile,
		S3Endpoint,
		S3PathStyle,
		S3Region,
		SafeSlaveBackup,
		SafeSlaveBackupTimeout,
		SegmentSize,
		SlaveInfo,
		Socket,
		Start,
		StreamFile,
		Tables,
		TargetDir,
		TLSCA,
		TLSCert,
		TLSKey,
		TLSServerName,
		Tmpdir,
		ToGTID,
		TokenFile,
		ToTime,
		UseMemory,
		User,
	}
}

// Names maps settings to how one front end spells them ("--tls-cert", "[sst] tcert").
// A setting it does not hold keeps its human name.
type Names map[Setting]string

// Name is how n spells s.
func (n Names) Name(s Setting) string {
	if v, ok := n[s]; ok {
		return v
	}
	return s.String()
}

// Error is an error whose text names settings. Its Error is the text with the human
// names; Render spells them as a front end does. Build one with Errorf.
type Error struct {
	format string
	args   []any
	plain  error // the text with human names, and what %w wraps
}

// Errorf is fmt.Errorf whose Setting arguments a front end can respell: format them
// with %s. Wrapped errors (%w) keep working with errors.Is and errors.As; errors
// formatted with %v are respelled too, so use Errorf, not fmt.Errorf, to quote an error
// that may name a setting without wrapping it.
func Errorf(format string, args ...any) error {
	return &Error{format: format, args: args, plain: fmt.Errorf(format, args...)}
}

// Error implements error, with human names.
func (e *Error) Error() string { return e.plain.Error() }

// Unwrap returns the errors %w wrapped.
func (e *Error) Unwrap() []error {
	switch u := e.plain.(type) {
	case interface{ Unwrap() error }:
		return []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		return u.Unwrap()
	}
	return nil
}

// Settings returns the settings e names, in order.
func (e *Error) Settings() []Setting {
	var out []Setting
	for _, a := range e.args {
		if s, ok := a.(Setting); ok {
			out = append(out, s)
		}
	}
	return out
}

// text is e's text with the settings spelled by n, its own and those of the errors
// among its arguments (%w or %v alike).
func (e *Error) text(n Names) string {
	args := make([]any, len(e.args))
	for i, a := range e.args {
		switch v := a.(type) {
		case Setting:
			a = n.Name(v)
		case error:
			a = rendered(Render(v, n))
		}
		args[i] = a
	}
	return fmt.Errorf(e.format, args...).Error()
}

// rendered is an argument error's text, already spelled.
type rendered string

func (r rendered) Error() string { return string(r) }

// Render is err's text with every setting it names spelled by n: what a front end
// prints. Errors already respelled by Rename keep their spelling.
func Render(err error, n Names) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	walk(err, func(e *Error) {
		msg = strings.Replace(msg, e.Error(), e.text(n), 1)
	})
	return msg
}

// walk calls f on each *Error in err's tree, outermost first; it does not enter an
// error Rename made.
func walk(err error, f func(*Error)) {
	if err == nil {
		return
	}
	if _, ok := err.(*renamed); ok {
		return
	}
	if e, ok := err.(*Error); ok {
		f(e)
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, w := range u.Unwrap() {
			walk(w, f)
		}
	}
}

// Rename returns err with its settings spelled by n in its Error, for a front end
// that hands the error on to code that prints err.Error(). It unwraps to err; nil
// stays nil.
func Rename(err error, n Names) error {
	if err == nil {
		return nil
	}
	return &renamed{err: err, msg: Render(err, n)}
}

type renamed struct {
	err error
	msg string
}

func (r *renamed) Error() string { return r.msg }
func (r *renamed) Unwrap() error { return r.err }
