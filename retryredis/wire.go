package retryredis

import (
	"encoding"
	"net"
	"reflect"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// argState says what wire knows of an argument.
type argState uint8

const (
	// argKnown: the bytes go-redis writes for it.
	argKnown argState = iota
	// argUnknown: go-redis writes what MarshalBinary returns, and it failed
	// when asked again; the write may have gone otherwise.
	argUnknown
	// argRefused: go-redis refuses its type, so the command is never
	// written whole.
	argRefused
)

// wire returns v, an argument of a command, as go-redis v9 writes it on
// the wire (proto.Writer.WriteArg), where every argument is a bulk string:
//   - nil as ""; a string, *string, []byte or net.IP as its bytes;
//   - integers of every size, signed or not, and uintptr in decimal; bool
//     as 1 or 0; time.Duration as its nanoseconds in decimal;
//   - float32 and float64 with strconv's 'f' format, shortest precision
//     (a float32 widened first: 0.1 is 0.10000000149011612);
//   - time.Time in time.RFC3339Nano;
//   - a nil pointer to any of these as the type's zero value;
//   - any other encoding.BinaryMarshaler as its MarshalBinary, asked again
//     (argUnknown when that fails);
//   - any other type is refused (argRefused): go-redis fails the write.
//
// As in go-redis, every type named here is matched before
// BinaryMarshaler (time.Time is one too). It allocates, and runs only once
// an attempt failed.
func wire(v any) (string, argState) {
	switch v := v.(type) {
	case nil:
		return "", argKnown
	case string:
		return v, argKnown
	case []byte:
		return string(v), argKnown
	case net.IP:
		return string(v), argKnown
	case int, int8, int16, int32, int64, time.Duration: // a Duration's Nanoseconds is its int64
		return strconv.FormatInt(reflect.ValueOf(v).Int(), 10), argKnown
	case uint, uint8, uint16, uint32, uint64, uintptr:
		return strconv.FormatUint(reflect.ValueOf(v).Uint(), 10), argKnown
	case float32, float64:
		return strconv.FormatFloat(reflect.ValueOf(v).Float(), 'f', -1, 64), argKnown
	case bool:
		if v {
			return "1", argKnown
		}
		return "0", argKnown
	case time.Time:
		return v.Format(time.RFC3339Nano), argKnown
	case *string, *int, *int8, *int16, *int32, *int64, *uint, *uint8, *uint16, *uint32, *uint64, *uintptr,
		*float32, *float64, *bool, *time.Time, *time.Duration:
		p := reflect.ValueOf(v)
		if p.IsNil() {
			return wire(reflect.Zero(p.Type().Elem()).Interface())
		}
		return wire(p.Elem().Interface())
	case encoding.BinaryMarshaler:
		b, err := v.MarshalBinary()
		if err != nil {
			return "", argUnknown
		}
		return string(b), argKnown
	}
	return "", argRefused
}

// args adapts go-redis's arguments (the name first) to rediscmd.Args, each
// as go-redis writes it (see wire).
type args []any

func (a args) Len() int { return max(len(a)-1, 0) }

func (a args) Arg(i int) (string, bool) {
	s, st := wire(a[i+1])
	return s, st == argKnown
}

// wireName returns the name of cmd as go-redis writes it, in lower case,
// and ok false when it is not known. It is cmd.Name() for a name passed as
// a string, *string or []byte; go-redis's Name formats any other type with
// fmt.Sprint, which need not be what it writes.
func wireName(cmd redis.Cmder) (name string, ok bool) {
	a := cmd.Args()
	if len(a) == 0 {
		return "", false
	}
	switch a[0].(type) {
	case string, *string, []byte:
		return cmd.Name(), true
	}
	s, st := wire(a[0])
	return lower(s), st == argKnown
}

// unwritable reports whether go-redis refuses the type of one of cmd's
// arguments: it then fails every attempt's write before the command is
// written whole, which Redis never runs.
func unwritable(cmd redis.Cmder) bool {
	for _, v := range cmd.Args() {
		if refusedType(v) {
			return true
		}
	}
	return false
}

// refusedType reports whether wire says argRefused for v, without calling
// MarshalBinary.
func refusedType(v any) bool {
	if _, ok := v.(encoding.BinaryMarshaler); ok {
		return false
	}
	_, st := wire(v)
	return st == argRefused
}
