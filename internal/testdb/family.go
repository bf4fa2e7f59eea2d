package testdb

import (
	"context"
	"fmt"
	"strings"
)

// isMySQL reports whether db is a MySQL server rather than MariaDB, whose VERSION()
// says "MariaDB" (e.g. "10.11.19-MariaDB-0+deb12u1"; MySQL's is "8.0.31").
func isMySQL(ctx context.Context, db querier) (bool, error) {
	v, err := queryString(ctx, db, "SELECT VERSION()")
	if err != nil {
		return false, fmt.Errorf("tell MariaDB from MySQL: %w", err)
	}
	return !strings.Contains(v, "MariaDB"), nil
}
