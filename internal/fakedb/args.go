package fakedb

import (
	"database/sql/driver"
	"fmt"
	"strconv"
	"time"
)

// Point is an argument type that database/sql's default converter rejects
// and that the conn's CheckNamedValue accepts and keeps as is: passing one
// through proves that a wrapper forwards driver.NamedValueChecker. ECHO ?
// returns it unchanged, so it can be scanned back into a *Point.
type Point struct{ X, Y int }

// checkNamedValue accepts the types the fake server understands natively
// and leaves every other type to database/sql's default converter.
func checkNamedValue(nv *driver.NamedValue) error {
	switch nv.Value.(type) {
	case nil, int64, float64, bool, []byte, string, time.Time, Point:
		return nil
	}
	return driver.ErrSkip
}

// binder hands the arguments to the "?" operands of one statement in order.
type binder struct {
	args []driver.NamedValue
	used int
}

// next returns the next argument.
func (b *binder) next() (driver.Value, error) {
	if b.used >= len(b.args) {
		return nil, errString("fakedb: statement has more placeholders than the " + strconv.Itoa(len(b.args)) + " arguments given")
	}
	b.used++
	return b.args[b.used-1].Value, nil
}

// done checks that every argument was used.
func (b *binder) done() error {
	if b.used != len(b.args) {
		return errString("fakedb: statement uses " + strconv.Itoa(b.used) + " arguments, " + strconv.Itoa(len(b.args)) + " given")
	}
	return nil
}

// int reads an int64 operand.
func (b *binder) int(operand string) (int64, error) {
	if operand != "?" {
		n, err := strconv.ParseInt(operand, 10, 64)
		if err != nil {
			return 0, syntaxError(operand)
		}
		return n, nil
	}
	v, err := b.next()
	if err != nil {
		return 0, err
	}
	if n, ok := v.(int64); ok {
		return n, nil
	}
	return 0, badArg(b.used, "int64", v)
}

// string reads a text operand.
func (b *binder) string(operand string) (string, error) {
	if operand != "?" {
		return operand, nil
	}
	v, err := b.next()
	if err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	}
	return "", badArg(b.used, "text", v)
}

// duration reads a Go duration literal, or an argument that is a duration
// string or int64 nanoseconds.
func (b *binder) duration(operand string) (time.Duration, error) {
	s := operand
	if operand == "?" {
		v, err := b.next()
		if err != nil {
			return 0, err
		}
		switch v := v.(type) {
		case int64:
			return time.Duration(v), nil
		case string:
			s = v
		default:
			return 0, badArg(b.used, "duration", v)
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, syntaxError(s)
	}
	return d, nil
}

// value reads an operand of any type: a literal is a string.
func (b *binder) value(operand string) (driver.Value, error) {
	if operand != "?" {
		return operand, nil
	}
	return b.next()
}

func badArg(n int, want string, got driver.Value) error {
	return fmt.Errorf("fakedb: argument %d: want %s, got %T", n, want, got)
}
