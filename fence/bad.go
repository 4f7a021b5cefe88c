package fence

// badObject is an own.json or a node lease that cannot be trusted: it
// matches bad (ErrBadRecord or ErrBadLease, both damage: they match
// frames.ErrDamage) and cause, and names the object's key.
type badObject struct {
	bad   error
	key   string
	msg   string
	cause error // nil when the message says it all
}

func badRecord(key, msg string) error { return &badObject{bad: ErrBadRecord, key: key, msg: msg} }
func badLease(key, msg string) error  { return &badObject{bad: ErrBadLease, key: key, msg: msg} }

func (e *badObject) Error() string {
	s := e.bad.Error() + " " + e.key + ": " + e.msg
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

func (e *badObject) Unwrap() []error {
	if e.cause != nil {
		return []error{e.bad, e.cause}
	}
	return []error{e.bad}
}

// PrintsKey reports whether key is the object's (frames.KeyPrinter).
func (e *badObject) PrintsKey(key string) bool { return key == e.key }
