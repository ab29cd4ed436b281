//! Token and cost accounting.
