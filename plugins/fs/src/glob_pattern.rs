//! Compiling a glob from the model's input into a matcher, for `fs.glob`
//! and `fs.grep`: `*` and `?` stay within one folder level, `\` escapes.
//!
//! A glob is compiled through [`GlobSet`], whose build reports every
//! failure as an error. `Glob::compile_matcher` instead panics when the
//! regular expression behind a glob does not compile — braces nested past
//! the regex nesting limit (`{{{…a…}}}` 250 deep), or a pattern whose
//! automaton is over the size limit — and a panic in a component is a
//! trap, not the invalid-input error the model can act on.

use capstan_sdk::prelude::*;
use globset::{ErrorKind, GlobBuilder, GlobSet, GlobSetBuilder};

/// Compiles `pattern`, the value of input field `field`; a pattern that
/// cannot be matched is an invalid-input error naming the field.
pub fn compile(field: &str, pattern: &str) -> Result<GlobSet, ToolError> {
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|err| ToolError::invalid_input(format!("field `{field}`: {err}")))?;
    GlobSetBuilder::new()
        .add(glob)
        .build()
        .map_err(|err| match err.kind() {
            ErrorKind::Regex(_) => ToolError::invalid_input(format!(
                "field `{field}`: the pattern is too complex to match (braces `{{…}}` nested too \
                 deeply, or too long); give a simpler glob, such as **/*.rs"
            )),
            _ => ToolError::invalid_input(format!("field `{field}`: {err}")),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pattern of `depth` nested alternations around `a`.
    fn nested(depth: usize) -> String {
        format!("{}a{}", "{".repeat(depth), "}".repeat(depth))
    }

    fn assert_invalid(pattern: &str) {
        match compile("pattern", pattern) {
            Err(ToolError::InvalidInput(message)) => {
                assert!(message.starts_with("field `pattern`"), "{message}")
            }
            Err(other) => panic!("{pattern:?}: not invalid input: {other:?}"),
            Ok(_) => panic!("{pattern:?} compiled"),
        }
    }

    #[test]
    fn braces_nested_past_the_regex_limit_are_invalid_input() {
        // `Glob::compile_matcher` panics on these (globset 0.4.21,
        // glob.rs:297, "regex compilation shouldn't fail").
        for depth in [251, 300, 1000] {
            assert_invalid(&nested(depth));
            assert_invalid(&format!("src/{}/*.rs", nested(depth)));
            assert_invalid(&format!("{{x,{}}}", nested(depth)));
        }
        // Nesting the regex engine takes still matches.
        let set = compile("pattern", &nested(100)).unwrap();
        assert!(set.is_match("a"));
        assert!(!set.is_match("b"));
    }

    #[test]
    fn a_pattern_over_the_automaton_size_limit_is_invalid_input() {
        let alternatives: Vec<String> = (0..60_000).map(|i| format!("[a-z]{i}?*x")).collect();
        assert_invalid(&format!("**/{{{}}}", alternatives.join(",")));
    }

    #[test]
    fn malformed_patterns_are_invalid_input() {
        for pattern in ["[a", "{a", "a}", "[z-a]", "a\\"] {
            assert_invalid(pattern);
        }
    }

    #[test]
    fn a_star_stays_in_one_folder_level() {
        let set = compile("pattern", "src/*.rs").unwrap();
        assert!(set.is_match("src/main.rs"));
        assert!(!set.is_match("src/net/http.rs"));
        let set = compile("pattern", "src/**/*.rs").unwrap();
        assert!(set.is_match("src/net/http.rs"));
    }

    /// Random patterns over the glob's special characters: each compiles
    /// or is invalid input, and none panics.
    #[test]
    fn fuzzed_patterns_never_panic() {
        const PIECES: [&str; 20] = [
            "{",
            "}",
            ",",
            "[",
            "]",
            "!",
            "^",
            "-",
            "*",
            "**",
            "?",
            "\\",
            "/",
            "a",
            "é",
            "€",
            "{{{{{{{{{{",
            "}}}}}}}}}}",
            "[!",
            "[]",
        ];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        let mut compiled = 0;
        for _ in 0..20_000 {
            let length = next(80);
            let pattern: String = (0..length).map(|_| PIECES[next(PIECES.len())]).collect();
            match compile("pattern", &pattern) {
                Ok(_) => compiled += 1,
                Err(ToolError::InvalidInput(_)) => {}
                Err(other) => panic!("{pattern:?}: {other:?}"),
            }
        }
        assert!(compiled > 0, "some random patterns are valid globs");
    }
}
