//! Which hooks an event reaches: the event, and for tool events the
//! matcher (an exact name, `a|b`, or a regular expression).
