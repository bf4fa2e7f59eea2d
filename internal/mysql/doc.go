// Package mysql is ferry's way to a MySQL 8.0.30+ server: the probe (version, the
// variables a backup and its recovery need, the features ferry refuses), the privilege
// check, and the backup lock sequence (LOCK INSTANCE FOR BACKUP for the whole copy,
// FLUSH TABLES WITH READ LOCK only while non-InnoDB tables are copied, and the end
// point from performance_schema.log_status). It returns internal/mariadb's types
// (Info, Coordinates, Stage) so that the backup engine reaches either family through
// the same seam.
package mysql
