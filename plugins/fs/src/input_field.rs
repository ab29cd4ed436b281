//! Checks on input fields that several tools share.

use capstan_sdk::ToolError;

/// A count from the input that must be at least 1: `value`, or `default`
/// when the input left it out. A zero names the field in the error.
pub fn at_least_one(field: &str, value: Option<usize>, default: usize) -> Result<usize, ToolError> {
    match value {
        Some(0) => Err(ToolError::invalid_input(format!(
            "field `{field}`: must be at least 1"
        ))),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_refused_by_name_and_absence_means_the_default() {
        assert_eq!(at_least_one("limit", None, 7), Ok(7));
        assert_eq!(at_least_one("limit", Some(3), 7), Ok(3));
        assert_eq!(
            at_least_one("limit", Some(0), 7),
            Err(ToolError::invalid_input(
                "field `limit`: must be at least 1"
            ))
        );
    }
}
