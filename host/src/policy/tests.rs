//! Tests of [`Policy::decide`] and [`Decision::without_prompt`].

use super::*;
use serde_json::{Value, json};

const WS: &str = "/work/proj";

#[derive(Clone, Copy)]
enum Kind {
    ReadOnly,
    Writing,
    OpenWorld,
    OpenWorldRead,
}

fn decide_with(policy: &Policy, tool: &str, kind: Kind, input: &Value) -> Decision {
    let (read_only, destructive, open_world) = match kind {
        Kind::ReadOnly => (true, false, false),
        Kind::Writing => (false, true, false),
        Kind::OpenWorld => (false, false, true),
        Kind::OpenWorldRead => (true, false, true),
    };
    policy.decide(&ToolFacts {
        tool,
        read_only,
        destructive,
        open_world,
        input,
        workspace: Path::new(WS),
        capabilities: None,
    })
}

fn decide(policy: &Policy, tool: &str, kind: Kind) -> Decision {
    decide_with(policy, tool, kind, &json!({ "path": "src/a.rs" }))
}

fn rules(list: &[(RuleKind, &str)]) -> Vec<(RuleKind, Rule, Layer)> {
    list.iter()
        .map(|(kind, text)| (*kind, text.parse().unwrap(), Layer::User))
        .collect()
}

#[test]
fn every_mode_by_kind_of_tool() {
    use Kind::*;
    use Outcome::{Allow as A, Ask as Q, Deny as D};
    let table = [
        // mode, read-only, writing, open-world (writing), open-world (read-only)
        (Mode::Default, [A, Q, Q, Q]),
        (Mode::AcceptEdits, [A, A, Q, Q]),
        (Mode::Plan, [A, D, D, Q]),
        (Mode::Bypass, [A, A, A, A]),
    ];
    for (mode, expected) in table {
        let policy = Policy::new(mode, Vec::new());
        for (kind, want) in [ReadOnly, Writing, OpenWorld, OpenWorldRead]
            .into_iter()
            .zip(expected)
        {
            let d = decide(&policy, "x.y", kind);
            assert_eq!(d.outcome, want, "{mode}: {}", d.reason);
            assert_eq!(d.source, DecisionSource::Mode(mode));
            assert!(d.reason.contains("`x.y`"), "{}", d.reason);
        }
    }
}

#[test]
fn plan_mode_reason_says_how_to_switch() {
    let d = decide(
        &Policy::new(Mode::Plan, Vec::new()),
        "fs.write",
        Kind::Writing,
    );
    assert!(
        d.reason
            .starts_with("plan mode: nothing that changes files runs")
    );
    assert!(d.reason.contains("/mode"));
}

#[test]
fn deny_beats_allow_and_bypass() {
    let policy = Policy::new(
        Mode::Bypass,
        rules(&[
            (RuleKind::Allow, "fs.write"),
            (RuleKind::Deny, "fs.write(.env)"),
        ]),
    );
    let env = json!({ "path": "./.env" });
    let d = decide_with(&policy, "fs.write", Kind::Writing, &env);
    assert_eq!(d.outcome, Outcome::Deny);
    assert_eq!(
        d.source,
        DecisionSource::Rule {
            rule: "fs.write(.env)".into(),
            layer: Layer::User
        }
    );
    assert!(d.reason.contains("`fs.write(.env)`"), "{}", d.reason);
    assert!(d.reason.contains("user config"), "{}", d.reason);
    // Another path is allowed by the rule.
    let d = decide(&policy, "fs.write", Kind::Writing);
    assert_eq!(d.outcome, Outcome::Allow);
    assert!(matches!(d.source, DecisionSource::Rule { .. }));
}

#[test]
fn deny_even_for_read_only_tools() {
    let policy = Policy::new(
        Mode::Default,
        rules(&[(RuleKind::Deny, "fs.read(secrets/**)")]),
    );
    let input = json!({ "path": "secrets/key" });
    assert_eq!(
        decide_with(&policy, "fs.read", Kind::ReadOnly, &input).outcome,
        Outcome::Deny
    );
}

#[test]
fn a_claude_code_read_deny_rule_also_stops_lsp_on_that_file() {
    let policy = Policy::new(
        Mode::Default,
        rules(&[(RuleKind::Deny, "Read(secrets/**)")]),
    );
    let denied = json!({ "filePath": "secrets/key.rs", "line": 1, "character": 1 });
    assert_eq!(
        decide_with(&policy, "lsp", Kind::ReadOnly, &denied).outcome,
        Outcome::Deny
    );
    let other = json!({ "filePath": "src/main.rs", "line": 1, "character": 1 });
    assert_eq!(
        decide_with(&policy, "lsp", Kind::ReadOnly, &other).outcome,
        Outcome::Allow
    );
}

#[test]
fn allow_rule_does_not_beat_plan_mode() {
    let policy = Policy::new(Mode::Plan, rules(&[(RuleKind::Allow, "fs.*")]));
    assert_eq!(
        decide(&policy, "fs.write", Kind::Writing).outcome,
        Outcome::Deny
    );
}

#[test]
fn ask_rule_asks_except_in_bypass() {
    let list = rules(&[(RuleKind::Ask, "fs.read"), (RuleKind::Allow, "fs.*")]);
    for mode in [Mode::Default, Mode::AcceptEdits, Mode::Plan] {
        let d = decide(&Policy::new(mode, list.clone()), "fs.read", Kind::ReadOnly);
        assert_eq!(d.outcome, Outcome::Ask, "{mode}");
        assert!(matches!(d.source, DecisionSource::Rule { .. }));
    }
    let d = decide(&Policy::new(Mode::Bypass, list), "fs.read", Kind::ReadOnly);
    assert_eq!(d.outcome, Outcome::Allow);
    assert_eq!(d.source, DecisionSource::Mode(Mode::Bypass));
}

#[test]
fn allow_rules_with_paths_and_domains() {
    let policy = Policy::new(
        Mode::Default,
        rules(&[
            (RuleKind::Allow, "fs.edit(src/**)"),
            (RuleKind::Allow, "web.fetch(domain:*.rust-lang.org)"),
        ]),
    );
    let edit =
        |path: &str| decide_with(&policy, "fs.edit", Kind::Writing, &json!({ "path": path }));
    assert_eq!(edit("src/a.rs").outcome, Outcome::Allow);
    assert_eq!(edit("./src/a.rs").outcome, Outcome::Allow);
    assert_eq!(edit("/work/proj/src/a.rs").outcome, Outcome::Allow);
    assert_eq!(edit("../x/src/a.rs").outcome, Outcome::Ask);
    assert_eq!(edit("src/../../proj/src/a.rs").outcome, Outcome::Allow);
    assert_eq!(edit("src/../../proj2/src/a.rs").outcome, Outcome::Ask);
    assert_eq!(edit("/other/src/a.rs").outcome, Outcome::Ask);
    let fetch = |url: &str| {
        decide_with(
            &policy,
            "web.fetch",
            Kind::OpenWorld,
            &json!({ "url": url }),
        )
    };
    assert_eq!(
        fetch("https://doc.rust-lang.org/std").outcome,
        Outcome::Allow
    );
    assert_eq!(fetch("https://rust-lang.org/").outcome, Outcome::Ask);
    assert_eq!(
        fetch("https://doc.rust-lang.org.evil.io/").outcome,
        Outcome::Ask
    );
}

#[test]
fn session_allow() {
    let mut policy = Policy::new(Mode::Default, Vec::new());
    assert_eq!(
        decide(&policy, "fs.write", Kind::Writing).outcome,
        Outcome::Ask
    );
    policy.allow_for_session(Rule::tool("fs.write"));
    policy.allow_for_session(Rule::tool("fs.write"));
    assert_eq!(policy.rules().count(), 1);
    let (kind, rule, layer) = policy.rules().next().unwrap();
    assert_eq!(
        (*kind, rule.to_string(), *layer),
        (RuleKind::Allow, "fs.write".into(), Layer::Session)
    );
    let d = decide(&policy, "fs.write", Kind::Writing);
    assert_eq!(d.outcome, Outcome::Allow);
    assert_eq!(d.source, DecisionSource::Session);
    assert_eq!(
        decide(&policy, "fs.edit", Kind::Writing).outcome,
        Outcome::Ask
    );
}

#[test]
fn session_allow_does_not_beat_deny() {
    let mut policy = Policy::new(Mode::Default, rules(&[(RuleKind::Deny, "fs.write")]));
    policy.allow_for_session(Rule::tool("fs.write"));
    assert_eq!(
        decide(&policy, "fs.write", Kind::Writing).outcome,
        Outcome::Deny
    );
}

#[test]
fn mode_can_change() {
    let mut policy = Policy::new(Mode::Default, Vec::new());
    policy.set_mode(Mode::AcceptEdits);
    assert_eq!(policy.mode(), Mode::AcceptEdits);
    assert_eq!(
        decide(&policy, "fs.write", Kind::Writing).outcome,
        Outcome::Allow
    );
}

#[test]
fn without_prompt_turns_ask_into_deny() {
    let policy = Policy::new(Mode::Default, Vec::new());
    let asked = decide(&policy, "fs.write", Kind::Writing);
    assert_eq!(asked.outcome, Outcome::Ask);
    let d = asked.without_prompt("fs.write");
    assert_eq!(d.outcome, Outcome::Deny);
    assert_eq!(d.source, DecisionSource::NonInteractive);
    assert!(d.reason.contains("`fs.write`"), "{}", d.reason);
    assert!(
        d.reason.contains("--permission-mode accept-edits"),
        "{}",
        d.reason
    );
    assert!(d.reason.contains("--allow 'fs.write'"), "{}", d.reason);
    let edit = decide(&policy, "fs.edit", Kind::Writing).without_prompt("fs.edit");
    assert!(edit.reason.contains("--allow 'fs.edit'"), "{}", edit.reason);

    let allowed = decide(&policy, "fs.read", Kind::ReadOnly);
    assert_eq!(allowed.clone().without_prompt("fs.read"), allowed);
    let denied = decide(
        &Policy::new(Mode::Plan, Vec::new()),
        "fs.write",
        Kind::Writing,
    );
    assert_eq!(denied.clone().without_prompt("fs.write"), denied);
}

#[test]
fn layers_display() {
    assert_eq!(Layer::User.to_string(), "user config");
    assert_eq!(Layer::Session.to_string(), "this session");
}

#[test]
fn rules_that_can_never_match_are_warned_about_with_the_closest_tool() {
    let offered = [
        "fs.read", "fs.write", "fs.edit", "fs.glob", "fs.grep", "fs.ls", "task",
    ];
    let policy = Policy::new(
        Mode::Default,
        vec![
            (
                RuleKind::Allow,
                "fs.wirte".parse().unwrap(),
                Layer::CommandLine,
            ),
            (
                RuleKind::Allow,
                "Write(docs/**)".parse().unwrap(),
                Layer::CommandLine,
            ),
            (RuleKind::Deny, "fs.*".parse().unwrap(), Layer::User),
            (RuleKind::Ask, "fss.*".parse().unwrap(), Layer::User),
            (
                RuleKind::Deny,
                "Bash(rm:*)".parse().unwrap(),
                Layer::Project,
            ),
            (
                RuleKind::Ask,
                "WebFetch".parse().unwrap(),
                Layer::CommandLine,
            ),
            (
                RuleKind::Allow,
                "zzzz.qqqq".parse().unwrap(),
                Layer::CommandLine,
            ),
            (RuleKind::Allow, "*".parse().unwrap(), Layer::CommandLine),
        ],
    );
    let warnings = policy.unmatched_rule_warnings(&offered);
    assert_eq!(warnings.len(), 5, "{warnings:#?}");
    assert_eq!(
        warnings[0],
        "warning: the allow rule `fs.wirte` in the command line matches no tool in this session; did you mean `fs.write`?"
    );
    assert!(
        warnings[1].contains("`fss.*`") && warnings[1].ends_with("did you mean `fs.*`?"),
        "{}",
        warnings[1]
    );
    assert!(
        warnings[2].starts_with("note: the deny rule `Bash(rm:*)`"),
        "{}",
        warnings[2]
    );
    assert!(
        warnings[2].contains("exec.run, which is not offered here; it is kept"),
        "{}",
        warnings[2]
    );
    assert!(
        warnings[3].contains("`WebFetch`") && warnings[3].contains("(it stands for web.fetch)"),
        "{}",
        warnings[3]
    );
    assert!(
        warnings[4].contains("`zzzz.qqqq`") && warnings[4].contains("capstan tool list"),
        "{}",
        warnings[4]
    );
    // Once the tool is there, the rule is quiet.
    let with_web = ["fs.read", "web.fetch"];
    let warnings = policy.unmatched_rule_warnings(&with_web);
    assert!(
        !warnings.iter().any(|w| w.contains("WebFetch")),
        "{warnings:#?}"
    );
    // A Claude Code name in lower case is a typo of the tool, not a match.
    let lower = Policy::new(
        Mode::Default,
        vec![(RuleKind::Allow, "edit".parse().unwrap(), Layer::CommandLine)],
    );
    assert!(lower.unmatched_rule_warnings(&offered)[0].ends_with("did you mean `fs.edit`?"));
}

/// A call of a tool whose capabilities depend on its input (`exec.run`),
/// asking for `wants`.
fn decide_command(policy: &Policy, write: bool, net: bool, wants: &[String]) -> Decision {
    policy.decide(&ToolFacts {
        tool: "exec.run",
        read_only: !write,
        destructive: write,
        open_world: net,
        input: &json!({"command": "make"}),
        workspace: Path::new(WS),
        capabilities: Some(wants),
    })
}

#[test]
fn commands_are_judged_by_the_capabilities_they_ask_for() {
    let none: Vec<String> = Vec::new();
    let write = vec!["write the workspace".to_string()];
    let net = vec!["reach https://index.crates.io".to_string()];
    let both = [write.clone(), net.clone()].concat();
    for mode in Mode::ALL {
        let policy = Policy::new(mode, Vec::new());
        assert_eq!(
            decide_command(&policy, false, false, &none).outcome,
            Outcome::Allow,
            "{mode}"
        );
    }
    let plan = Policy::new(Mode::Plan, Vec::new());
    let refused = decide_command(&plan, true, false, &write);
    assert_eq!(refused.outcome, Outcome::Deny);
    assert!(
        refused.reason.contains("wants: write the workspace"),
        "{}",
        refused.reason
    );
    assert_eq!(
        decide_command(&plan, false, true, &net).outcome,
        Outcome::Deny
    );

    let default = Policy::new(Mode::Default, Vec::new());
    let asked = decide_command(&default, true, true, &both);
    assert_eq!(asked.outcome, Outcome::Ask);
    assert!(
        asked
            .reason
            .starts_with("exec.run wants: write the workspace; reach https://index.crates.io"),
        "{}",
        asked.reason
    );

    let edits = Policy::new(Mode::AcceptEdits, Vec::new());
    assert_eq!(
        decide_command(&edits, true, false, &write).outcome,
        Outcome::Allow
    );
    assert_eq!(
        decide_command(&edits, false, true, &net).outcome,
        Outcome::Ask
    );

    let bypass = Policy::new(Mode::Bypass, Vec::new());
    assert_eq!(
        decide_command(&bypass, true, true, &both).outcome,
        Outcome::Allow
    );
}

#[test]
fn capability_rules_on_commands() {
    let policy = Policy::new(
        Mode::Default,
        rules(&[
            (RuleKind::Allow, "exec.run(write)"),
            (RuleKind::Deny, "exec.run(net:https://*.evil.example)"),
            (RuleKind::Allow, "exec.run(net:https://*.npmjs.org)"),
            (RuleKind::Ask, "exec.run(git push:*)"),
        ]),
    );
    let decide = |input: Value, write: bool, net: bool, wants: &[&str]| {
        let wants: Vec<String> = wants.iter().map(|w| w.to_string()).collect();
        policy.decide(&ToolFacts {
            tool: "exec.run",
            read_only: !write,
            destructive: write,
            open_world: net,
            input: &input,
            workspace: Path::new(WS),
            capabilities: Some(&wants),
        })
    };
    let write = decide(
        json!({"command": "make", "write": true}),
        true,
        false,
        &["write the workspace"],
    );
    assert_eq!(write.outcome, Outcome::Allow, "{}", write.reason);
    // The write rule does not let the call reach the network too.
    let both = decide(
        json!({"command": "make", "write": true, "net": ["https://example.com"]}),
        true,
        true,
        &["write the workspace", "reach https://example.com"],
    );
    assert_eq!(both.outcome, Outcome::Ask, "{}", both.reason);
    let npm = decide(
        json!({"command": "npm ci", "net": ["https://registry.npmjs.org"]}),
        false,
        true,
        &["reach https://registry.npmjs.org"],
    );
    assert_eq!(npm.outcome, Outcome::Allow, "{}", npm.reason);
    let npm_and_other = decide(
        json!({"command": "npm ci", "net": ["https://registry.npmjs.org", "https://example.com"]}),
        false,
        true,
        &[
            "reach https://registry.npmjs.org",
            "reach https://example.com",
        ],
    );
    assert_eq!(
        npm_and_other.outcome,
        Outcome::Ask,
        "{}",
        npm_and_other.reason
    );
    let evil = decide(
        json!({"command": "curl", "net": ["https://a.evil.example"]}),
        false,
        true,
        &["reach https://a.evil.example"],
    );
    assert_eq!(evil.outcome, Outcome::Deny, "{}", evil.reason);
    let push = decide(
        json!({"command": "git push origin main"}),
        false,
        false,
        &[],
    );
    assert_eq!(push.outcome, Outcome::Ask, "{}", push.reason);

    let rule: Rule = "exec.run(net:https://*.npmjs.org)".parse().unwrap();
    assert_eq!(rule.to_string(), "exec.run(net:https://*.npmjs.org)");
    assert!("exec.run(net:not an origin)".parse::<Rule>().is_err());
}

#[test]
fn reading_is_denied_by_the_rules_that_deny_fs_read_or_lsp_on_the_path() {
    let workspace = Path::new("/work/ws");
    let policy = Policy::new(
        Mode::Default,
        rules(&[
            (RuleKind::Deny, "Read(secrets/**)"),
            (RuleKind::Deny, "lsp(vendor/**)"),
            (RuleKind::Deny, "fs.read(/etc/**)"),
            (RuleKind::Deny, "fs.write(src/**)"),
            (RuleKind::Ask, "fs.read(docs/**)"),
        ]),
    );
    for denied in [
        "secrets/key.fk",
        "/work/ws/secrets/deep/key.fk",
        "vendor/lib.fk",
        "/etc/passwd",
    ] {
        assert!(
            policy.denies_reading(Path::new(denied), workspace),
            "{denied}"
        );
    }
    for allowed in [
        "src/main.fk",
        "docs/a.md",
        "/work/ws/app.fk",
        "/elsewhere/secrets/x",
    ] {
        assert!(
            !policy.denies_reading(Path::new(allowed), workspace),
            "{allowed}"
        );
    }
}
