//go:build pooldriver_dialect

// This file is not part of pooldriver's build: integration/upstream/run.sh
// copies it beside zz_pooldriver_test.go to link in pooldriver's postgres
// dialect, which registers itself for postgres:// DSNs and for Wrap.

package stdlib_test

import _ "github.com/pooldriver/pooldriver/dialects/postgres"
