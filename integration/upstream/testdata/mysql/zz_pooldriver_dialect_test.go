//go:build pooldriver_dialect

// This file is not part of pooldriver's build: integration/upstream/run.sh
// copies it beside zz_pooldriver_test.go. An external test package may
// import what imports the driver, so it links in pooldriver's mysql
// dialect, which registers itself for mysql:// DSNs and for Wrap.

package mysql_test

import _ "github.com/pooldriver/pooldriver/dialects/mysql"
