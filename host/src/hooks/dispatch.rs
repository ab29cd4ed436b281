//! Running the hooks an event reaches, concurrently, and combining their
//! decisions.
