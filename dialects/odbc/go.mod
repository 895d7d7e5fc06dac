module github.com/pooldriver/pooldriver/dialects/odbc

go 1.25.0

require (
	github.com/alexbrainman/odbc v0.0.0-20250601004241-49e6b2bc0cf0
	github.com/pooldriver/pooldriver v0.1.0
)

require golang.org/x/sys v0.47.0 // indirect
