//! The model's context: the system prompt and the project's instructions.
