//! What a component imports and exports, decoded from its WIT: the tools,
//! hooks and skills it offers, and whether its imports are ones the host
//! provides and its manifest justifies.
