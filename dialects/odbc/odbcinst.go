package odbc

/*
#cgo LDFLAGS: -lodbcinst
#include <stdlib.h>
#include <odbcinst.h>
*/
import "C"

import (
	"strconv"
	"strings"
	"unsafe"
)

// profileString reads key from section of an ODBC configuration file,
// "ODBC.INI" (data sources) or "ODBCINST.INI" (drivers, and the driver
// manager's own settings), through unixODBC: so the system, user and
// environment-selected files (ODBCSYSINI, ODBCINI, ODBCINSTINI) apply exactly
// as they do for the driver manager. It returns "" when the key is absent.
func profileString(section, key, file string) string {
	cs, ck, cf := C.CString(section), C.CString(key), C.CString(file)
	defer C.free(unsafe.Pointer(cs))
	defer C.free(unsafe.Pointer(ck))
	defer C.free(unsafe.Pointer(cf))
	empty := C.CString("")
	defer C.free(unsafe.Pointer(empty))
	var buf [1024]C.char
	n := C.SQLGetPrivateProfileString(cs, ck, empty, &buf[0], C.int(len(buf)), cf)
	if n <= 0 {
		return ""
	}
	return C.GoString(&buf[0])
}

// odbcIni reads the configuration of unixODBC that matters to the dialect.
type odbcIni interface {
	// dsnDriver returns the Driver entry of a data source: a driver's
	// name (a section of odbcinst.ini) or the path of its library.
	dsnDriver(dsn string) string
	// driverEntry returns key from a driver's section of odbcinst.ini.
	driverEntry(driver, key string) string
	// pooling returns the driver manager's [ODBC] Pooling setting.
	pooling() string
}

type unixODBC struct{}

func (unixODBC) dsnDriver(dsn string) string { return profileString(dsn, "Driver", "ODBC.INI") }

func (unixODBC) driverEntry(driver, key string) string {
	return profileString(driver, key, "ODBCINST.INI")
}

func (unixODBC) pooling() string { return profileString("ODBC", "Pooling", "ODBCINST.INI") }

// poolingOn reads a Pooling value as unixODBC does: on if it starts with
// '1', 'y' or "on", whatever the case.
func poolingOn(v string) bool {
	v = strings.ToLower(v)
	return strings.HasPrefix(v, "1") || strings.HasPrefix(v, "y") || strings.HasPrefix(v, "on")
}

// cpTimeout reads a CPTimeout value as unixODBC does (atoi).
func cpTimeout(v string) int {
	v = strings.TrimSpace(v)
	end := 0
	for end < len(v) && (v[end] >= '0' && v[end] <= '9' || end == 0 && (v[0] == '-' || v[0] == '+')) {
		end++
	}
	n, _ := strconv.Atoi(v[:end])
	return n
}
