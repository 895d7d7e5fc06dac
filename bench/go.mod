module github.com/pooldriver/pooldriver/bench

go 1.25.0

replace github.com/pooldriver/pooldriver => ../

require (
	github.com/jackc/puddle/v2 v2.2.3
	github.com/pooldriver/pooldriver v0.0.0-00010101000000-000000000000
)

require golang.org/x/sync v0.22.0 // indirect
