//! An offline scripted model.
