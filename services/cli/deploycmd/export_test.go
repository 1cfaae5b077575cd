package deploycmd

// PostgresInitSQLFor is the init script for database db (tests use their own).
var PostgresInitSQLFor = postgresInitSQL
