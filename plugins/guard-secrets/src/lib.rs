//! guard-secrets: a PreToolUse hook that denies a tool call whose input
//! carries likely credentials — cloud keys, private keys, service tokens,
//! JWTs, and `password = ...`-style assignments of random-looking values —
//! and tells the model what it found, redacted (`AWS access key AKIA…XYZ1
//! in content, line 3`), so it can write a placeholder or read the value
//! from the environment instead.
//!
//! Every text field of the input is scanned, whatever the tool, except the
//! text an edit replaces (`old`, `old_string`): removing a secret is fine.
//! Known documentation examples (`AKIAIOSFODNN7EXAMPLE`) and placeholders
//! (`${TOKEN}`, `<your-key>`, `changeme`) are not reported.

use std::sync::OnceLock;

use capstan_sdk::prelude::*;
use capstan_sdk::serde_json::Value;
use regex::Regex;

/// What a detector reports: its kind and, for the value, which capture
/// group holds it (0 = the whole match).
struct Detector {
    kind: &'static str,
    pattern: &'static str,
    group: usize,
    /// Values must also look random (assignments of passwords and secrets).
    random: bool,
    /// Show no part of the value (private key blocks).
    opaque: bool,
    /// Texts (lower case) one of which a match must contain; the expression
    /// is compiled only for texts that hold one, so clean writes stay cheap.
    needles: &'static [&'static str],
}

const DETECTORS: &[Detector] = &[
    Detector {
        kind: "private key",
        pattern: r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?-----",
        group: 0,
        random: false,
        opaque: true,
        needles: &["private key"],
    },
    Detector {
        kind: "AWS access key",
        pattern: r"\b((?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16})\b",
        group: 1,
        random: false,
        opaque: false,
        needles: &["akia", "asia", "abia", "acca"],
    },
    Detector {
        kind: "AWS secret access key",
        pattern: r#"(?i)aws[\w.\-]{0,30}?(?:secret|sk)[\w.\-]{0,30}?["']?\s*[:=]\s*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
        group: 1,
        random: false,
        opaque: false,
        needles: &["aws"],
    },
    Detector {
        kind: "Google API key",
        pattern: r"\b(AIza[0-9A-Za-z_\-]{35})\b",
        group: 1,
        random: false,
        opaque: false,
        needles: &["aiza"],
    },
    Detector {
        kind: "Google service account key",
        pattern: r#""private_key_id"\s*:\s*"([0-9a-f]{40})""#,
        group: 1,
        random: false,
        opaque: false,
        needles: &["private_key_id"],
    },
    Detector {
        kind: "Azure storage account key",
        pattern: r"(?i)AccountKey=([A-Za-z0-9+/]{86}==)",
        group: 1,
        random: false,
        opaque: false,
        needles: &["accountkey="],
    },
    Detector {
        kind: "Azure client secret",
        pattern: r#"(?i)(?:azure|client)[_\-]?secret["']?\s*[:=]\s*["']?([A-Za-z0-9_~.\-]{3}8Q~[A-Za-z0-9_~.\-]{31,34})"#,
        group: 1,
        random: false,
        opaque: false,
        needles: &["8q~"],
    },
    Detector {
        kind: "GitHub token",
        pattern: r"\b((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{82})\b",
        group: 1,
        random: false,
        opaque: false,
        needles: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
    },
    Detector {
        kind: "GitLab token",
        pattern: r"\b(glpat-[A-Za-z0-9_\-]{20,})\b",
        group: 1,
        random: false,
        opaque: false,
        needles: &["glpat-"],
    },
    Detector {
        kind: "Slack token",
        pattern: r"\b(xox[abposr]-[A-Za-z0-9\-]{10,})\b",
        group: 1,
        random: false,
        opaque: false,
        needles: &["xox"],
    },
    Detector {
        kind: "Slack webhook URL",
        pattern: r"(https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]{20,})",
        group: 1,
        random: false,
        opaque: false,
        needles: &["hooks.slack.com"],
    },
    Detector {
        kind: "Stripe key",
        pattern: r"\b((?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,})\b",
        group: 1,
        random: false,
        opaque: false,
        needles: &["sk_live_", "sk_test_", "rk_live_", "rk_test_"],
    },
    Detector {
        kind: "Anthropic API key",
        pattern: r"\b(sk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_\-]{80,})",
        group: 1,
        random: false,
        opaque: false,
        needles: &["sk-ant-"],
    },
    Detector {
        kind: "OpenAI API key",
        pattern: r"\b(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}T3BlbkFJ[A-Za-z0-9_\-]{20,}|sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,}|sk-[A-Za-z0-9]{48})\b",
        group: 1,
        random: false,
        opaque: false,
        needles: &["sk-"],
    },
    Detector {
        kind: "JSON Web Token",
        pattern: r"\b(eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,})",
        group: 1,
        random: false,
        opaque: false,
        needles: &["eyj"],
    },
    Detector {
        kind: "secret assignment",
        pattern: r#"(?i)(?:^|[^a-z0-9])(?:password|passwd|pwd|secret|secret[_\-]?key|api[_\-]?key|apikey|access[_\-]?token|auth[_\-]?token|client[_\-]?secret|private[_\-]?key)\b["']?\s*[:=]\s*["']?([^\s"'`,;]{8,})"#,
        group: 1,
        random: true,
        opaque: false,
        needles: &["pass", "pwd", "secret", "key", "token"],
    },
];

/// Detector `index`'s expression, compiled on first use.
fn detector_regex(index: usize) -> Option<&'static Regex> {
    static REGEXES: OnceLock<Vec<OnceLock<Option<Regex>>>> = OnceLock::new();
    let cells = REGEXES.get_or_init(|| DETECTORS.iter().map(|_| OnceLock::new()).collect());
    cells
        .get(index)?
        .get_or_init(|| Regex::new(DETECTORS[index].pattern).ok())
        .as_ref()
}

/// One likely credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What it looks like.
    pub kind: &'static str,
    /// The value, redacted.
    pub redacted: String,
    /// The line it is on, from 1.
    pub line: usize,
}

/// The likely credentials in `text`, in order of appearance.
pub fn scan(text: &str) -> Vec<Finding> {
    let mut found: Vec<(usize, Finding)> = Vec::new();
    let mut taken: Vec<std::ops::Range<usize>> = Vec::new();
    let lower = text.to_ascii_lowercase();
    for (index, detector) in DETECTORS.iter().enumerate() {
        if !detector.needles.iter().any(|n| lower.contains(n)) {
            continue;
        }
        let Some(re) = detector_regex(index) else {
            continue;
        };
        for caps in re.captures_iter(text) {
            let Some(value) = caps.get(detector.group) else {
                continue;
            };
            let range = value.range();
            if taken
                .iter()
                .any(|t| t.start < range.end && range.start < t.end)
            {
                continue;
            }
            let value = value.as_str();
            if is_placeholder(value) || (detector.random && !looks_random(value)) {
                continue;
            }
            taken.push(range.clone());
            let line = text[..range.start].matches('\n').count() + 1;
            let redacted = if detector.opaque {
                "(PEM block)".to_string()
            } else {
                redact(value)
            };
            found.push((
                range.start,
                Finding {
                    kind: detector.kind,
                    redacted,
                    line,
                },
            ));
        }
    }
    found.sort_by_key(|(at, _)| *at);
    found.into_iter().map(|(_, f)| f).collect()
}

/// The first and last four characters of a value (two for short ones).
pub fn redact(value: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    let keep = if chars.len() >= 16 { 4 } else { 2 };
    if chars.len() <= keep * 2 {
        return "…".to_string();
    }
    let head: String = chars[..keep].iter().collect();
    let tail: String = chars[chars.len() - keep..].iter().collect();
    format!("{head}…{tail}")
}

/// Documentation examples and template placeholders, not secrets.
fn is_placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    const WORDS: &[&str] = &[
        "example",
        "changeme",
        "change_me",
        "xxxx",
        "****",
        "your_",
        "your-",
        "dummy",
        "placeholder",
        "redacted",
        "sample",
        "environ",
        "process.env",
        "getenv",
        "secrets.",
        "password123",
        "<",
        ">",
        "${",
        "{{",
        "%(",
        "(",
    ];
    value.starts_with('$') || WORDS.iter().any(|w| lower.contains(w))
}

/// Whether an assigned value looks like a real secret rather than a name
/// or a word: mixed kinds of characters and enough entropy.
fn looks_random(value: &str) -> bool {
    let identifier_path = value.split('.').all(|part| {
        !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    }) && value.contains('.');
    if identifier_path {
        return false;
    }
    let classes = [
        value.chars().any(|c| c.is_ascii_lowercase()),
        value.chars().any(|c| c.is_ascii_uppercase()),
        value.chars().any(|c| c.is_ascii_digit()),
        value.chars().any(|c| !c.is_ascii_alphanumeric()),
    ]
    .iter()
    .filter(|on| **on)
    .count();
    classes >= 2 && value.chars().any(|c| !c.is_ascii_alphabetic()) && entropy(value) >= 3.0
}

/// Shannon entropy in bits per character.
fn entropy(value: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    let mut total = 0usize;
    for c in value.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
        total += 1;
    }
    if total == 0 {
        return 0.0;
    }
    counts
        .values()
        .map(|&n| {
            let p = n as f64 / total as f64;
            -p * p.log2()
        })
        .sum()
}

/// Fields whose text is being removed or matched, not written.
const SKIPPED_FIELDS: &[&str] = &["old", "old_string"];

/// Every text in the input, with the field it is in (`content`,
/// `edits/0/new`).
fn texts<'a>(value: &'a Value, at: String, out: &mut Vec<(String, &'a str)>) {
    match value {
        Value::String(s) => out.push((at, s)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                texts(item, join(&at, &i.to_string()), out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                if !SKIPPED_FIELDS.contains(&key.as_str()) {
                    texts(item, join(&at, key), out);
                }
            }
        }
        _ => {}
    }
}

fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}/{key}")
    }
}

/// The denial for a tool input, if it carries likely credentials.
pub fn check_input(tool: &str, input: &Value) -> Option<String> {
    let mut fields = Vec::new();
    texts(input, String::new(), &mut fields);
    let mut lines = Vec::new();
    for (field, text) in fields {
        for finding in scan(text) {
            lines.push(format!(
                "{} {} in `{field}`, line {}",
                finding.kind, finding.redacted, finding.line
            ));
        }
    }
    if lines.is_empty() {
        return None;
    }
    Some(format!(
        "guard-secrets blocked this {tool} call: its input contains what looks like a credential: {}. Do not write secrets into files; use a placeholder and read the real value from an environment variable or a secret manager at run time.",
        lines.join("; ")
    ))
}

fn guard(event: &Event, _ctx: &Context) -> Result<Decision, String> {
    let (Some(tool), Some(input)) = (event.tool_name(), event.tool_input()) else {
        return Ok(Decision::Proceed);
    };
    Ok(match check_input(tool, input) {
        Some(reason) => Decision::Deny(reason),
        None => Decision::Proceed,
    })
}

fn hooks() -> Vec<Hook> {
    vec![Hook::on(HookEvent::PreToolUse, guard)]
}

capstan_sdk::export_hooks!(hooks);

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use capstan_sdk::serde_json::json;

    #[test]
    fn every_detector_compiles() {
        for index in 0..DETECTORS.len() {
            assert!(detector_regex(index).is_some(), "{}", DETECTORS[index].kind);
        }
    }

    fn kinds(text: &str) -> Vec<&'static str> {
        scan(text).into_iter().map(|f| f.kind).collect()
    }

    #[test]
    fn finds_credentials_of_each_kind() {
        let aws_secret = "aws_secret_access_key = \"kT9/2hXq8Lm3Zp0Rb7Vc1Nd5Wf6Yg4Jh+QsUeTaO\"";
        let cases: Vec<(String, &str)> = vec![
            ("-----BEGIN RSA PRIVATE KEY-----\nMIIE...".into(), "private key"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----".into(), "private key"),
            ("key_id = AKIAZ7QH3LNT5KXW2XYZ".into(), "AWS access key"),
            (aws_secret.into(), "AWS secret access key"),
            ("GOOGLE_KEY=AIzaSyD3kF9x_Qm2LpR7vT0wY5zB8cN1hJ4gK6e".into(), "Google API key"),
            (
                "\"private_key_id\": \"3f7a9c2e1b4d6f8a0c2e4b6d8f0a1c3e5b7d9f1a\"".into(),
                "Google service account key",
            ),
            (
                format!("DefaultEndpointsProtocol=https;AccountName=x;AccountKey={}==", "Ab3+".repeat(21) + "Cd"),
                "Azure storage account key",
            ),
            (format!("token: ghp_{}", "a1B2c3D4e5".repeat(4)), "GitHub token"),
            ("GITLAB=glpat-x7Kq2Lm9Np4Rs8Tv1Wz3".into(), "GitLab token"),
            ("SLACK=xoxb-1234567890-abcdefghijKLMN".into(), "Slack token"),
            (
                "https://hooks.slack.com/services/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".into(),
                "Slack webhook URL",
            ),
            (format!("stripe = sk_live_{}", "4eC39HqLyjWDarjtT1zdp7dc"), "Stripe key"),
            (format!("ANTHROPIC_API_KEY=sk-ant-api03-{}", "Xy9_Kq-2".repeat(12)), "Anthropic API key"),
            (format!("OPENAI=sk-proj-{}", "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z".repeat(2)), "OpenAI API key"),
            (format!("sk-{}", "a1B2c3D4e5F6g7H8".repeat(3)), "OpenAI API key"),
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U".into(),
                "JSON Web Token",
            ),
            ("DB_PASSWORD=Xk9#mQ2$vL7p".into(), "secret assignment"),
            ("api_key: \"f3a9Q7x2Lk8Zp1Rm\"".into(), "secret assignment"),
        ];
        for (text, kind) in cases {
            assert_eq!(kinds(&text), vec![kind], "{text}");
        }
    }

    #[test]
    fn reports_are_redacted_with_lines() {
        let text = "# config\nregion = \"eu-west-1\"\nkey = \"AKIAZ7QH3LNT5KXW2XYZ\"\n";
        let found = scan(text);
        assert_eq!(
            found,
            vec![Finding {
                kind: "AWS access key",
                redacted: "AKIA…2XYZ".into(),
                line: 3
            }]
        );
        let reason =
            check_input("fs.write", &json!({"path": "config.py", "content": text})).unwrap();
        assert!(
            reason.contains("AWS access key AKIA…2XYZ in `content`, line 3"),
            "{reason}"
        );
        assert!(
            !reason.contains("AKIAZ7QH3LNT5KXW2XYZ"),
            "never the value itself"
        );
        let pem = scan("x\n-----BEGIN PRIVATE KEY-----\nMIIEv...");
        assert_eq!(pem[0].redacted, "(PEM block)");
        assert_eq!(pem[0].line, 2);
    }

    #[test]
    fn ordinary_code_is_not_flagged() {
        let clean = [
            "password = os.environ[\"DB_PASSWORD\"]",
            "token: ${{ secrets.GITHUB_TOKEN }}",
            "api_key = get_api_key()",
            "password = self.password",
            "secret_key = settings.secret_key",
            "password: str",
            "let password = prompt_password()?;",
            "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "password = \"changeme\"",
            "PASSWORD=<your-password-here>",
            "api_key = \"your_api_key\"",
            "fn check_password(password: &str) -> bool { password.len() > 8 }",
            "The secret: keep functions small.",
            "skip_serializing_if = \"Option::is_none\"",
            "sk-ant is the prefix of Anthropic keys",
            "const ALPHABET: &str = \"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\";",
            "commit 3f7a9c2e1b4d6f8a0c2e4b6d8f0a1c3e5b7d9f1a",
            "password = \"passwordpassword\"",
            "https://example.com/path?id=eyJhbGciOi",
        ];
        for text in clean {
            assert!(scan(text).is_empty(), "{text}: {:?}", scan(text));
        }
    }

    #[test]
    fn an_edit_may_remove_a_secret_but_not_add_one() {
        let removing = json!({"path": "a.py", "old": "KEY = 'AKIAZ7QH3LNT5KXW2XYZ'", "new": "KEY = os.environ['KEY']"});
        assert_eq!(check_input("fs.edit", &removing), None);
        let adding =
            json!({"path": "a.py", "old": "KEY = None", "new": "KEY = 'AKIAZ7QH3LNT5KXW2XYZ'"});
        assert!(
            check_input("fs.edit", &adding)
                .unwrap()
                .contains("in `new`, line 1")
        );
        let nested =
            json!({"edits": [{"new_string": "ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5"}]});
        assert!(
            check_input("other.tool", &nested)
                .unwrap()
                .contains("`edits/0/new_string`")
        );
    }
}
