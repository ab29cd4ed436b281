//! Installing, updating and removing plugins: consent, copying into the
//! store, precompiling, and recording the lock entry.
