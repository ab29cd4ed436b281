//! Optional package signatures: ed25519 in minisign format, checked
//! against the publisher keys the user trusts.
