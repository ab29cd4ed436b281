//! The loop against an in-process model and the real `fs` plugin: how
//! calls are answered, refused, capped and interrupted, and that no request
//! ever carries a tool call without its result.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::*;
use crate::hooks::HookSet;
use crate::model::{Block, EventSink, ModelFuture, Request, Response, Role, StreamEvent};
use crate::plugin::Catalog;
use crate::sandbox::{Limits, Sandbox};

/// What the test model does for one request.
enum Step {
    /// Streams the text, then answers with the text and these calls.
    Answer(&'static str, Vec<(&'static str, Value)>),
    /// Streams the text, then never finishes.
    Hang(&'static str),
}

/// A model that follows a list of steps and keeps every request.
#[derive(Clone, Default)]
struct TestModel {
    steps: Arc<Mutex<VecDeque<Step>>>,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl TestModel {
    fn new(steps: Vec<Step>) -> Self {
        Self {
            steps: Arc::new(Mutex::new(steps.into())),
            requests: Arc::default(),
        }
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

impl Provider for TestModel {
    fn name(&self) -> &str {
        "test"
    }

    fn stream<'a>(&'a self, request: &'a Request, events: EventSink<'a>) -> ModelFuture<'a> {
        self.requests.lock().unwrap().push(request.clone());
        let step = self.steps.lock().unwrap().pop_front();
        Box::pin(async move {
            let step = step.unwrap_or(Step::Answer("(no more steps)", Vec::new()));
            match step {
                Step::Hang(text) => {
                    events(StreamEvent::TextDelta(text.to_string()));
                    std::future::pending::<()>().await;
                    unreachable!()
                }
                Step::Answer(text, calls) => {
                    events(StreamEvent::TextDelta(text.to_string()));
                    let mut content = vec![Block::Text {
                        text: text.to_string(),
                    }];
                    let stop_reason = if calls.is_empty() {
                        StopReason::EndTurn
                    } else {
                        StopReason::ToolUse
                    };
                    for (i, (name, input)) in calls.into_iter().enumerate() {
                        content.push(Block::ToolUse {
                            id: format!("call_{}_{i}", self.requests.lock().unwrap().len()),
                            name: name.to_string(),
                            input,
                        });
                    }
                    Ok(Response {
                        content,
                        stop_reason,
                        usage: Usage {
                            input_tokens: 10,
                            output_tokens: 5,
                            ..Usage::default()
                        },
                    })
                }
            }
        })
    }
}

/// Records events; raises the interrupt when a given tool starts; answers
/// permission questions from a list.
#[derive(Default)]
struct TestFrontend {
    started: Vec<String>,
    finished: Vec<(String, bool, String)>,
    interrupt_on_start: Option<(String, Interrupt)>,
    answers: VecDeque<PermissionAnswer>,
    asked: Vec<String>,
    asked_needs: Vec<CallNeeds>,
}

impl Frontend for TestFrontend {
    fn event(&mut self, event: AgentEvent<'_>) {
        match event {
            AgentEvent::ToolStarted { tool, .. } => {
                self.started.push(tool.to_string());
                if let Some((name, interrupt)) = &self.interrupt_on_start
                    && name == tool
                {
                    interrupt.raise();
                }
            }
            AgentEvent::ToolFinished {
                tool,
                is_error,
                output,
                ..
            } => self
                .finished
                .push((tool.to_string(), is_error, output.to_string())),
            _ => {}
        }
    }

    fn can_prompt(&self) -> bool {
        !self.answers.is_empty()
    }

    fn ask<'a>(
        &'a mut self,
        request: &'a PermissionRequest<'a>,
    ) -> futures_util::future::LocalBoxFuture<'a, PermissionAnswer> {
        self.asked.push(request.tool.name.clone());
        self.asked_needs.push(request.needs.clone());
        let answer = self
            .answers
            .pop_front()
            .unwrap_or(PermissionAnswer::Deny { reason: None });
        Box::pin(async move { answer })
    }
}

/// The shared test compile cache's folder: the sandbox's home, whose
/// `compiled` folder holds the components.
fn compile_cache() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-compile-cache")
}

struct Setup {
    agent: Agent,
    model: TestModel,
    ws: tempfile::TempDir,
}

async fn setup(steps: Vec<Step>, mode: Mode) -> Setup {
    setup_offering(steps, mode, false).await
}

/// The same session with the `task` tool offered.
async fn setup_with_subagents(steps: Vec<Step>, mode: Mode) -> Setup {
    setup_offering(steps, mode, true).await
}

/// A session over a workspace holding a.txt and b.txt, with the built-in
/// tools and, if `subagents`, the `task` tool.
async fn setup_offering(steps: Vec<Step>, mode: Mode, subagents: bool) -> Setup {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    std::fs::write(ws.path().join("b.txt"), "beta\n").unwrap();
    let sandbox = Sandbox::new(&crate::home::Home::at(compile_cache(), compile_cache())).unwrap();
    let mut toolbox = Toolbox::load(sandbox, &Catalog::builtin(), ws.path(), Limits::default())
        .await
        .unwrap();
    if subagents {
        toolbox
            .register(std::sync::Arc::new(super::subagent::TaskTool::default()))
            .unwrap();
    }
    let model = TestModel::new(steps);
    let agent = Agent::new(
        Box::new(model.clone()),
        toolbox,
        Policy::new(mode, Vec::new()),
        AgentConfig::new("test-model", "system"),
        ws.path().to_path_buf(),
        None,
    );
    Setup { agent, model, ws }
}

/// Every tool call in a request is answered in the message after it.
fn assert_no_orphans(request: &Request) {
    for (i, message) in request.messages.iter().enumerate() {
        for block in &message.content {
            if let Block::ToolUse { id, .. } = block {
                let next = request
                    .messages
                    .get(i + 1)
                    .unwrap_or_else(|| panic!("tool call {id} is the last message"));
                assert!(
                    next.content.iter().any(
                        |b| matches!(b, Block::ToolResult { tool_use_id, .. } if tool_use_id == id)
                    ),
                    "tool call {id} has no result in {next:?}"
                );
            }
        }
    }
}

fn results(message: &Message) -> Vec<(String, String, bool)> {
    message
        .content
        .iter()
        .filter_map(|b| match b {
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } => Some((tool_use_id.clone(), content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn results_come_back_in_call_order_and_errors_go_to_the_model() {
    let steps = vec![
        Step::Answer(
            "reading",
            vec![
                ("fs__read", json!({"path": "b.txt"})),
                ("fs__nope", json!({})),
                ("fs__read", json!("not an object")),
                ("fs__read", json!({"path": "a.txt"})),
                ("fs__read", json!({"path": "missing.txt"})),
            ],
        ),
        Step::Answer("done", Vec::new()),
    ];
    let mut s = setup(steps, Mode::Default).await;
    let mut frontend = TestFrontend::default();
    let report = s
        .agent
        .run_turn("go", &mut frontend, &Interrupt::new())
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Finished(StopReason::EndTurn));
    assert_eq!((report.requests, report.tool_calls), (2, 5));
    assert_eq!(report.text, "done");
    let requests = s.model.requests();
    assert_no_orphans(&requests[1]);
    let sent = results(requests[1].messages.last().unwrap());
    let ids: Vec<&str> = sent.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        ["call_1_0", "call_1_1", "call_1_2", "call_1_3", "call_1_4"]
    );
    assert!(sent[0].1.contains("beta") && !sent[0].2);
    assert!(sent[1].1.contains("no tool called `fs__nope`") && sent[1].2);
    assert!(sent[1].1.contains("fs__read"), "{}", sent[1].1);
    assert!(sent[2].1.contains("JSON object") && sent[2].2);
    assert!(sent[3].1.contains("alpha") && !sent[3].2);
    assert!(sent[4].2, "a missing file is an error result");
    // The six fs tools and web.fetch (web.search is off until configured).
    assert_eq!(requests[1].tools.len(), 7);
}

#[tokio::test]
async fn an_interrupt_during_tools_answers_every_call() {
    let steps = vec![
        Step::Answer(
            "working",
            vec![
                ("fs__read", json!({"path": "a.txt"})),
                (
                    "fs__edit",
                    json!({"path": "a.txt", "old": "alpha", "new": "x"}),
                ),
                ("fs__read", json!({"path": "b.txt"})),
            ],
        ),
        Step::Answer("after", Vec::new()),
    ];
    let mut s = setup(steps, Mode::Bypass).await;
    let interrupt = Interrupt::new();
    let mut frontend = TestFrontend {
        interrupt_on_start: Some(("fs.read".into(), interrupt.clone())),
        ..TestFrontend::default()
    };
    let report = s
        .agent
        .run_turn("go", &mut frontend, &interrupt)
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Interrupted);
    let last = s.agent.messages().last().unwrap();
    let sent = results(last);
    assert_eq!(sent.len(), 3);
    assert!(
        sent.iter()
            .all(|(_, text, is_error)| *is_error && text == INTERRUPTED_RESULT)
    );
    // The write after the interrupt never ran.
    assert_eq!(
        std::fs::read_to_string(s.ws.path().join("a.txt")).unwrap(),
        "alpha\n"
    );
    interrupt.clear();
    s.agent
        .run_turn("continue", &mut TestFrontend::default(), &interrupt)
        .await
        .unwrap();
    let requests = s.model.requests();
    assert_no_orphans(&requests[1]);
    // The new prompt joins the tool results' user message.
    let last = requests[1].messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    assert!(matches!(last.content.last(), Some(Block::Text { text }) if text == "continue"));
}

#[tokio::test]
async fn an_interrupt_while_streaming_keeps_the_partial_answer() {
    let mut s = setup(vec![Step::Hang("half an ans")], Mode::Default).await;
    let interrupt = Interrupt::new();
    let raiser = interrupt.clone();
    let mut frontend = TestFrontend::default();
    let (report, ()) = tokio::join!(
        s.agent.run_turn("go", &mut frontend, &interrupt),
        async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            raiser.raise();
        }
    );
    assert_eq!(report.unwrap().end, TurnEnd::Interrupted);
    let messages = s.agent.messages();
    assert_eq!(messages.len(), 2);
    assert_eq!(
        messages[1].content,
        vec![Block::Text {
            text: "half an ans".into()
        }]
    );
}

#[tokio::test]
async fn plan_mode_refuses_writes_and_the_model_hears_why() {
    let steps = vec![
        Step::Answer(
            "editing",
            vec![("fs__write", json!({"path": "new.txt", "content": "x"}))],
        ),
        Step::Answer("ok", Vec::new()),
    ];
    let mut s = setup(steps, Mode::Plan).await;
    s.agent
        .run_turn("go", &mut TestFrontend::default(), &Interrupt::new())
        .await
        .unwrap();
    assert!(!s.ws.path().join("new.txt").exists());
    let sent = results(s.model.requests()[1].messages.last().unwrap());
    assert!(sent[0].2);
    assert!(sent[0].1.starts_with("Permission denied:"), "{}", sent[0].1);
    assert!(sent[0].1.contains("plan"), "{}", sent[0].1);
}

#[tokio::test]
async fn allowing_for_the_session_stops_the_questions() {
    let write = |n: u32| {
        (
            "fs__write",
            json!({"path": format!("f{n}.txt"), "content": "x"}),
        )
    };
    let steps = vec![
        Step::Answer("one", vec![write(1)]),
        Step::Answer("two", vec![write(2), write(3)]),
        Step::Answer("done", Vec::new()),
    ];
    let mut s = setup(steps, Mode::Default).await;
    let mut frontend = TestFrontend {
        answers: vec![PermissionAnswer::AllowSession].into(),
        ..TestFrontend::default()
    };
    s.agent
        .run_turn("go", &mut frontend, &Interrupt::new())
        .await
        .unwrap();
    assert_eq!(frontend.asked, ["fs.write"]);
    for n in 1..=3 {
        assert!(s.ws.path().join(format!("f{n}.txt")).exists());
    }
}

#[tokio::test]
async fn a_denial_with_a_reason_reaches_the_model() {
    let steps = vec![
        Step::Answer(
            "editing",
            vec![("fs__write", json!({"path": "n.txt", "content": "x"}))],
        ),
        Step::Answer("ok", Vec::new()),
    ];
    let mut s = setup(steps, Mode::Default).await;
    let mut frontend = TestFrontend {
        answers: vec![PermissionAnswer::Deny {
            reason: Some("use b.txt instead".into()),
        }]
        .into(),
        ..TestFrontend::default()
    };
    s.agent
        .run_turn("go", &mut frontend, &Interrupt::new())
        .await
        .unwrap();
    let sent = results(s.model.requests()[1].messages.last().unwrap());
    assert!(sent[0].1.contains("use b.txt instead"), "{}", sent[0].1);
    assert!(!s.ws.path().join("n.txt").exists());
}

#[tokio::test]
async fn the_turn_limit_ends_the_turn_with_every_call_answered() {
    let read = || vec![("fs__read", json!({"path": "a.txt"}))];
    let steps = vec![
        Step::Answer("1", read()),
        Step::Answer("2", read()),
        Step::Answer("3", read()),
    ];
    let mut s = setup(steps, Mode::Default).await;
    s.agent.parts.config.max_turns = 2;
    let report = s
        .agent
        .run_turn("go", &mut TestFrontend::default(), &Interrupt::new())
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::MaxTurns(2));
    assert_eq!(s.model.requests().len(), 2);
    assert_eq!(s.agent.messages().last().unwrap().role, Role::User);
}

#[tokio::test]
async fn long_results_are_capped_with_a_note() {
    let steps = vec![
        Step::Answer("reading", vec![("fs__read", json!({"path": "a.txt"}))]),
        Step::Answer("ok", Vec::new()),
    ];
    let mut s = setup(steps, Mode::Default).await;
    s.agent.parts.config.result_cap = 8;
    s.agent
        .run_turn("go", &mut TestFrontend::default(), &Interrupt::new())
        .await
        .unwrap();
    let sent = results(s.model.requests()[1].messages.last().unwrap());
    assert!(sent[0].1.contains("[output truncated"), "{}", sent[0].1);
}

#[tokio::test]
async fn decisions_and_the_conversation_are_in_the_transcript() {
    let steps = vec![
        Step::Answer(
            "editing",
            vec![
                ("fs__read", json!({"path": "a.txt"})),
                ("fs__write", json!({"path": "n.txt", "content": "x"})),
            ],
        ),
        Step::Answer("ok", Vec::new()),
    ];
    let mut s = setup(steps, Mode::Default).await;
    let home_dir = tempfile::tempdir().unwrap();
    let home = Home::at(home_dir.path().to_path_buf(), home_dir.path().join("cache"));
    let sessions = crate::session::Sessions::for_workspace(&home, s.ws.path()).unwrap();
    let transcript = sessions.create("test-model", "test").unwrap();
    let path = transcript.path().to_path_buf();
    s.agent.set_transcript(transcript);
    s.agent
        .run_turn("go", &mut TestFrontend::default(), &Interrupt::new())
        .await
        .unwrap();
    s.agent.finish().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let permissions: Vec<(&str, &str)> = records
        .iter()
        .filter(|r| r["type"] == "permission")
        .map(|r| (r["tool"].as_str().unwrap(), r["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(permissions, [("fs.read", "allow"), ("fs.write", "deny")]);
    let loaded = crate::session::load::load(&path).unwrap();
    assert_eq!(loaded.messages, s.agent.messages());
    assert!(loaded.ended);
    assert_eq!(loaded.usage.input_tokens, 20);
}
/// The text of a message's text blocks, joined.
fn text_of(message: &Message) -> String {
    message
        .content
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn near_the_context_window_the_turn_goes_on_from_a_summary() {
    let steps = vec![
        Step::Answer("reading", vec![("fs__read", json!({"path": "a.txt"}))]),
        Step::Answer("SUMMARY: the user said go; a.txt holds alpha.", Vec::new()),
        Step::Answer("done", Vec::new()),
    ];
    let mut s = setup(steps, Mode::Default).await;
    // Every test answer reports 15 tokens: over 85% of this window.
    s.agent.parts.config.context_window = 15;
    let report = s
        .agent
        .run_turn("go", &mut TestFrontend::default(), &Interrupt::new())
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Finished(StopReason::EndTurn));
    assert_eq!(report.text, "done");
    let requests = s.model.requests();
    assert_eq!(requests.len(), 3);
    // The summary request holds the whole conversation and the instruction.
    let asked = text_of(requests[1].messages.last().unwrap());
    assert!(asked.contains(compact::SUMMARY_REQUEST_MARKER), "{asked}");
    assert_eq!(requests[1].messages.len(), 3);
    // The turn goes on from the summary alone, told to carry on.
    assert_eq!(requests[2].messages.len(), 1);
    assert_no_orphans(&requests[2]);
    let summary = text_of(&requests[2].messages[0]);
    assert!(summary.contains("SUMMARY: the user said go"), "{summary}");
    assert!(summary.contains("Continue the task"), "{summary}");
    assert_eq!(s.agent.messages().len(), 2);
}

#[tokio::test]
async fn compact_replaces_the_conversation_and_a_resume_starts_from_the_summary() {
    let steps = vec![
        Step::Answer("reading", vec![("fs__read", json!({"path": "a.txt"}))]),
        Step::Answer("a.txt says alpha", Vec::new()),
        Step::Answer("SUMMARY: a.txt says alpha.", Vec::new()),
    ];
    let mut s = setup(steps, Mode::Default).await;
    let home_dir = tempfile::tempdir().unwrap();
    let home = Home::at(home_dir.path().to_path_buf(), home_dir.path().join("cache"));
    let sessions = crate::session::Sessions::for_workspace(&home, s.ws.path()).unwrap();
    let transcript = sessions.create("test-model", "test").unwrap();
    let path = transcript.path().to_path_buf();
    s.agent.set_transcript(transcript);
    let mut frontend = TestFrontend::default();
    s.agent
        .run_turn("what is in a.txt?", &mut frontend, &Interrupt::new())
        .await
        .unwrap();
    assert_eq!(s.agent.messages().len(), 4);

    let report = s
        .agent
        .compact(
            Some("keep the file names"),
            &mut frontend,
            &Interrupt::new(),
        )
        .await
        .unwrap();
    assert_eq!(report.trigger, CompactTrigger::Manual);
    assert_eq!(report.messages_before, 4);
    assert_eq!(report.tokens_before, Some(15));
    assert_eq!(report.summary, "SUMMARY: a.txt says alpha.");
    let asked = text_of(s.model.requests()[2].messages.last().unwrap());
    assert!(asked.ends_with("focus on: keep the file names"), "{asked}");
    assert_eq!(s.agent.messages().len(), 1);
    assert!(text_of(&s.agent.messages()[0]).contains("SUMMARY: a.txt says alpha."));

    // The transcript keeps the history and the compaction; loading it
    // gives the conversation as it now is.
    let records: Vec<Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let compacted = records.iter().find(|r| r["type"] == "compacted").unwrap();
    assert_eq!(compacted["trigger"], "manual");
    assert_eq!(compacted["messages_before"], 4);
    assert!(records.iter().any(|r| r["type"] == "tool_results"));
    let loaded = crate::session::load::load(&path).unwrap();
    assert_eq!(loaded.messages, s.agent.messages());
}

#[tokio::test]
async fn a_compaction_without_a_summary_leaves_the_conversation_alone() {
    let steps = vec![
        Step::Answer("hello", Vec::new()),
        Step::Answer("", vec![("fs__read", json!({"path": "a.txt"}))]),
    ];
    let mut s = setup(steps, Mode::Default).await;
    let mut frontend = TestFrontend::default();
    let empty = s
        .agent
        .compact(None, &mut frontend, &Interrupt::new())
        .await;
    assert!(matches!(
        empty,
        Err(AgentError::Compact(CompactError::Empty))
    ));
    s.agent
        .run_turn("hi", &mut frontend, &Interrupt::new())
        .await
        .unwrap();
    let before = s.agent.messages().to_vec();
    let failed = s
        .agent
        .compact(None, &mut frontend, &Interrupt::new())
        .await;
    assert!(
        matches!(failed, Err(AgentError::Compact(CompactError::NoSummary))),
        "{failed:?}"
    );
    assert_eq!(s.agent.messages(), before);
}

#[tokio::test]
async fn an_active_skill_pre_approves_and_disallows_until_the_users_turn_ends() {
    let ws = tempfile::tempdir().unwrap();
    let home_dir = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    std::fs::create_dir(ws.path().join("notes")).unwrap();
    let skill = ws.path().join(".capstan/skills/careful");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: careful\ndescription: Writes notes.\nallowed-tools: Write(notes/**)\ndisallowed-tools: LS\n---\nWrite notes.\n",
    )
    .unwrap();
    let sandbox = Sandbox::new(&crate::home::Home::at(compile_cache(), compile_cache())).unwrap();
    let mut toolbox = Toolbox::load(sandbox, &Catalog::builtin(), ws.path(), Limits::default())
        .await
        .unwrap();
    let home = crate::home::Home::at(home_dir.path().to_path_buf(), home_dir.path().join("cache"));
    let skills = crate::skills::Skills::discover_in(
        toolbox.sandbox(),
        &home,
        ws.path(),
        Limits::default(),
        None,
    )
    .await;
    toolbox.set_skills(skills);
    let write = |path: &str| ("fs__write", json!({"path": path, "content": "x"}));
    let steps = vec![
        Step::Answer("loading", vec![("skill", json!({"name": "careful"}))]),
        Step::Answer(
            "working",
            vec![
                write("notes/n.md"),
                ("fs__ls", json!({"path": "."})),
                ("fs__read", json!({"path": "a.txt"})),
                write("other.md"),
            ],
        ),
        Step::Answer("done", Vec::new()),
        Step::Answer(
            "again",
            vec![("fs__ls", json!({"path": "."})), write("notes/m.md")],
        ),
        Step::Answer("finished", Vec::new()),
    ];
    let model = TestModel::new(steps);
    let mut agent = Agent::new(
        Box::new(model.clone()),
        toolbox,
        Policy::new(Mode::Default, Vec::new()),
        AgentConfig::new("test-model", "system"),
        ws.path().to_path_buf(),
        None,
    );
    // The one question asked is answered no.
    let mut frontend = TestFrontend {
        answers: VecDeque::from([
            PermissionAnswer::Deny { reason: None },
            PermissionAnswer::Deny { reason: None },
        ]),
        ..TestFrontend::default()
    };
    agent
        .run_turn("take notes", &mut frontend, &Interrupt::new())
        .await
        .unwrap();
    let requests = model.requests();
    let loaded = results(requests[1].messages.last().unwrap());
    assert!(
        loaded[0].1.contains("Write notes.")
            && loaded[0].1.contains("without asking")
            && !loaded[0].2,
        "{loaded:?}"
    );
    let sent = results(requests[2].messages.last().unwrap());
    // Pre-approved: written without a question.
    assert!(!sent[0].2, "{sent:?}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes/n.md")).unwrap(),
        "x"
    );
    // Disallowed while the skill is active.
    assert!(
        sent[1].2 && sent[1].1.contains("`careful` is active"),
        "{sent:?}"
    );
    // Not listed: not restricted, decided as usual (reads run; a write
    // outside the pattern asks, and the answer is no).
    assert!(!sent[2].2 && sent[2].1.contains("alpha"), "{sent:?}");
    assert!(sent[3].2, "{sent:?}");
    assert_eq!(frontend.asked, ["fs.write"]);
    assert!(!ws.path().join("other.md").exists());

    // The next turn of the same session: the skill is no longer active.
    agent
        .run_turn("now list", &mut frontend, &Interrupt::new())
        .await
        .unwrap();
    let requests = model.requests();
    let sent = results(requests[4].messages.last().unwrap());
    assert!(!sent[0].2 && sent[0].1.contains("a.txt"), "{sent:?}");
    assert!(sent[1].2, "{sent:?}");
    assert_eq!(frontend.asked, ["fs.write", "fs.write"]);
    assert!(!ws.path().join("notes/m.md").exists());
}

#[tokio::test]
async fn a_task_runs_a_read_only_sub_agent_whose_answer_is_the_result() {
    let steps = vec![
        Step::Answer(
            "delegating",
            vec![(
                "task",
                json!({"description": "find alpha", "prompt": "Which file says alpha?"}),
            )],
        ),
        // The sub-agent: a write it is not offered, then a read.
        Step::Answer(
            "looking",
            vec![
                ("fs__write", json!({"path": "x.txt", "content": "x"})),
                ("fs__read", json!({"path": "a.txt"})),
            ],
        ),
        Step::Answer("a.txt says alpha.", Vec::new()),
        Step::Answer("The sub-agent found it in a.txt.", Vec::new()),
    ];
    let Setup {
        mut agent,
        model,
        ws,
    } = setup_with_subagents(steps, Mode::Bypass).await;
    let report = agent
        .run_turn("go", &mut TestFrontend::default(), &Interrupt::new())
        .await
        .unwrap();
    assert_eq!(report.text, "The sub-agent found it in a.txt.");
    assert!(!ws.path().join("x.txt").exists());
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    // The parent is offered the task tool; the sub-agent only read-only
    // tools, and its own prompt.
    let names = |r: &Request| r.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert!(names(&requests[0]).contains(&"task".to_string()));
    assert!(names(&requests[0]).contains(&"fs__write".to_string()));
    let offered = names(&requests[1]);
    assert!(offered.contains(&"fs__read".to_string()), "{offered:?}");
    assert!(!offered.contains(&"task".to_string()), "{offered:?}");
    assert!(!offered.contains(&"fs__write".to_string()), "{offered:?}");
    assert!(requests[1].system.contains("You are a sub-agent"));
    assert_eq!(requests[1].messages.len(), 1);
    assert_eq!(text_of(&requests[1].messages[0]), "Which file says alpha?");
    let sub_results = results(requests[2].messages.last().unwrap());
    assert!(sub_results[0].2, "the write is refused: {sub_results:?}");
    assert!(
        sub_results[0]
            .1
            .contains("There is no tool called `fs__write`")
    );
    assert!(!sub_results[1].2 && sub_results[1].1.contains("alpha"));
    // The parent gets the sub-agent's answer as the task's result.
    let sent = results(requests[3].messages.last().unwrap());
    assert!(!sent[0].2, "{sent:?}");
    assert!(sent[0].1.starts_with("a.txt says alpha."), "{sent:?}");
    assert!(
        sent[0]
            .1
            .contains("[sub-agent: 2 tool calls (1 failed), 2 model requests"),
        "{sent:?}"
    );
    // Its requests count towards the session's tokens.
    assert_eq!(agent.cost().usage.input_tokens, 40);
}

#[tokio::test]
async fn a_task_with_bad_input_is_refused_as_invalid() {
    let steps = vec![
        Step::Answer("delegating", vec![("task", json!({"prompt": "x"}))]),
        Step::Answer("ok", Vec::new()),
    ];
    let Setup {
        mut agent,
        model,
        ws: _ws,
    } = setup_with_subagents(steps, Mode::Default).await;
    agent
        .run_turn("go", &mut TestFrontend::default(), &Interrupt::new())
        .await
        .unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "no sub-agent ran");
    let sent = results(requests[1].messages.last().unwrap());
    assert!(
        sent[0].2 && sent[0].1.contains("`description` is missing"),
        "{sent:?}"
    );
}

/// A hook in the host's own code: records each event's payload and answers
/// from a fixed table.
struct RecordingHook {
    subscriptions: Vec<crate::hooks::Subscription>,
    answers: Vec<(HookEvent, crate::hooks::Decision)>,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl RecordingHook {
    fn new(answers: Vec<(HookEvent, crate::hooks::Decision)>) -> (Self, Arc<Mutex<Vec<Value>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let hook = Self {
            subscriptions: HookEvent::ALL
                .into_iter()
                .map(|event| crate::hooks::Subscription {
                    event,
                    matcher: None,
                })
                .collect(),
            answers,
            seen: seen.clone(),
        };
        (hook, seen)
    }
}

impl crate::hooks::Hook for RecordingHook {
    fn name(&self) -> &str {
        "recorder"
    }

    fn subscriptions(&self) -> &[crate::hooks::Subscription] {
        &self.subscriptions
    }

    fn handle<'a>(
        &'a self,
        event: HookEvent,
        payload: &'a Value,
    ) -> futures_util::future::BoxFuture<
        'a,
        Result<crate::hooks::HookOutput, crate::hooks::HookFailure>,
    > {
        self.seen.lock().unwrap().push(payload.clone());
        let decision = self
            .answers
            .iter()
            .find(|(e, _)| *e == event)
            .map_or(crate::hooks::Decision::Proceed, |(_, d)| d.clone());
        Box::pin(async move {
            Ok(crate::hooks::HookOutput {
                decision,
                system_message: None,
            })
        })
    }
}

fn events_seen(seen: &Arc<Mutex<Vec<Value>>>) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|p| p["hook_event_name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn notification_fires_before_the_user_is_asked_and_permission_request_can_answer() {
    let write = || {
        Step::Answer(
            "writing",
            vec![("fs__write", json!({"path": "c.txt", "content": "x"}))],
        )
    };
    // No hook answers the permission request: the user is asked, after a
    // Notification.
    let mut s = setup(
        vec![write(), Step::Answer("done", Vec::new())],
        Mode::Default,
    )
    .await;
    let (hook, seen) = RecordingHook::new(Vec::new());
    s.agent
        .set_hooks(HookSet::new(vec![Arc::new(hook)]).unwrap(), None);
    let mut frontend = TestFrontend {
        answers: vec![PermissionAnswer::AllowOnce].into(),
        ..TestFrontend::default()
    };
    s.agent
        .run_turn("write c", &mut frontend, &Interrupt::new())
        .await
        .unwrap();
    assert_eq!(frontend.asked, ["fs.write"]);
    let events = events_seen(&seen);
    let at = |name: &str| events.iter().position(|e| e == name).unwrap();
    assert!(at("PreToolUse") < at("PermissionRequest"));
    assert!(at("PermissionRequest") < at("Notification"));
    assert!(at("Notification") < at("PostToolUse"));
    let notification = seen.lock().unwrap()[at("Notification")].clone();
    assert_eq!(notification["notification_type"], "permission_prompt");
    assert!(
        notification["message"]
            .as_str()
            .unwrap()
            .contains("fs.write")
    );

    // A PermissionRequest hook that denies: nobody is asked, nothing runs.
    let mut s = setup(
        vec![write(), Step::Answer("done", Vec::new())],
        Mode::Default,
    )
    .await;
    let (hook, seen) = RecordingHook::new(vec![(
        HookEvent::PermissionRequest,
        crate::hooks::Decision::Deny("not today".into()),
    )]);
    s.agent
        .set_hooks(HookSet::new(vec![Arc::new(hook)]).unwrap(), None);
    let mut frontend = TestFrontend {
        answers: vec![PermissionAnswer::AllowOnce].into(),
        ..TestFrontend::default()
    };
    s.agent
        .run_turn("write c", &mut frontend, &Interrupt::new())
        .await
        .unwrap();
    assert!(frontend.asked.is_empty());
    assert!(!s.ws.path().join("c.txt").exists());
    assert!(!events_seen(&seen).contains(&"Notification".to_string()));
    let last = s.model.requests().last().unwrap().clone();
    let (_, text, is_error) = results(last.messages.last().unwrap())[0].clone();
    assert!(
        is_error && text.contains("refused the permission request: not today"),
        "{text}"
    );
}

#[tokio::test]
async fn session_start_context_goes_with_the_first_prompt_and_end_fires_once() {
    let mut s = setup(vec![Step::Answer("hi", Vec::new())], Mode::Default).await;
    let (hook, seen) = RecordingHook::new(vec![(
        HookEvent::SessionStart,
        crate::hooks::Decision::AddContext("the build is red".into()),
    )]);
    s.agent
        .set_hooks(HookSet::new(vec![Arc::new(hook)]).unwrap(), None);
    let mut frontend = TestFrontend::default();
    s.agent
        .start_session("startup", &mut frontend)
        .await
        .unwrap();
    s.agent
        .run_turn("hello", &mut frontend, &Interrupt::new())
        .await
        .unwrap();
    s.agent.end_session("other", &mut frontend).await.unwrap();
    let first = &s.model.requests()[0];
    let user = &first.messages[0];
    assert!(user.content.iter().any(
        |b| matches!(b, Block::Text { text } if text == "Context from hook recorder:\nthe build is red")
    ));
    assert_eq!(
        events_seen(&seen),
        ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"]
    );
    let payloads = seen.lock().unwrap().clone();
    assert_eq!(payloads[0]["source"], "startup");
    assert_eq!(payloads[3]["reason"], "other");
}

#[tokio::test]
async fn events_without_a_host_moment_yet_still_dispatch() {
    // capstan has no sub-agents or compaction yet; their events reach
    // hooks that subscribe, with matchers on their subjects.
    let (hook, seen) = RecordingHook::new(vec![(
        HookEvent::SubagentStop,
        crate::hooks::Decision::KeepGoing("more".into()),
    )]);
    let set = HookSet::new(vec![Arc::new(hook)]).unwrap();
    for event in [
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
        HookEvent::PreCompact,
        HookEvent::PostCompact,
    ] {
        let answers = set.dispatch(event, &json!({"hook_event_name": event.name(), "trigger": "manual", "agent_type": "general"})).await;
        assert_eq!(answers.len(), 1, "{event:?}");
        let combined = crate::hooks::combine(event, &answers);
        assert_eq!(
            combined.keep_going.is_some(),
            event == HookEvent::SubagentStop
        );
    }
    assert_eq!(seen.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn a_sub_agent_fires_subagent_start_its_tool_events_and_subagent_stop() {
    let steps = vec![
        Step::Answer(
            "delegating",
            vec![(
                "task",
                json!({"description": "find alpha", "prompt": "Which file says alpha?"}),
            )],
        ),
        Step::Answer("looking", vec![("fs__read", json!({"path": "a.txt"}))]),
        // SubagentStop asks the sub-agent to keep going each time; it does,
        // at most three times.
        Step::Answer("a.txt.", Vec::new()),
        Step::Answer("a.txt, I think.", Vec::new()),
        Step::Answer("a.txt, surely.", Vec::new()),
        Step::Answer("a.txt, line 1.", Vec::new()),
        Step::Answer("Found it.", Vec::new()),
    ];
    let Setup {
        mut agent,
        model,
        ws: _ws,
    } = setup_with_subagents(steps, Mode::Default).await;
    let (hook, seen) = RecordingHook::new(vec![(
        HookEvent::SubagentStop,
        crate::hooks::Decision::KeepGoing("give the line number".into()),
    )]);
    agent.set_hooks(HookSet::new(vec![Arc::new(hook)]).unwrap(), None);
    agent
        .run_turn("go", &mut TestFrontend::default(), &Interrupt::new())
        .await
        .unwrap();
    let events = events_seen(&seen);
    let at = |name: &str| events.iter().position(|e| e == name).unwrap();
    assert!(at("SubagentStart") < at("SubagentStop"), "{events:?}");
    let payloads = seen.lock().unwrap().clone();
    let start = &payloads[at("SubagentStart")];
    assert_eq!(start["agent_type"], "task");
    assert_eq!(start["prompt"], "Which file says alpha?");
    let agent_id = start["agent_id"].as_str().unwrap().to_string();
    // The sub-agent's read fired PreToolUse with its id; the keep-going
    // made it answer again, then the session's own Stop fired last.
    let sub_read = payloads
        .iter()
        .find(|p| p["hook_event_name"] == "PreToolUse" && p["tool_name"] == "fs.read")
        .unwrap();
    assert_eq!(sub_read["agent_id"], agent_id.as_str());
    let stops: Vec<&Value> = payloads
        .iter()
        .filter(|p| p["hook_event_name"] == "SubagentStop")
        .collect();
    assert_eq!(stops.len(), 1 + MAX_STOP_CONTINUES as usize, "{events:?}");
    assert_eq!(stops[0]["stop_hook_active"], false);
    assert_eq!(stops[1]["stop_hook_active"], true);
    assert_eq!(events.last().map(String::as_str), Some("Stop"));
    // Only the user's prompt fired UserPromptSubmit.
    assert_eq!(
        events.iter().filter(|e| *e == "UserPromptSubmit").count(),
        1
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 7);
    let sent = results(requests[6].messages.last().unwrap());
    assert!(sent[0].1.starts_with("a.txt, line 1."), "{sent:?}");
}

#[tokio::test]
async fn compaction_fires_pre_compact_and_post_compact() {
    let steps = vec![
        Step::Answer("hello", Vec::new()),
        Step::Answer("SUMMARY: said hello.", Vec::new()),
    ];
    let mut s = setup(steps, Mode::Default).await;
    let (hook, seen) = RecordingHook::new(Vec::new());
    s.agent
        .set_hooks(HookSet::new(vec![Arc::new(hook)]).unwrap(), None);
    let mut frontend = TestFrontend::default();
    s.agent
        .run_turn("hi", &mut frontend, &Interrupt::new())
        .await
        .unwrap();
    s.agent
        .compact(Some("names"), &mut frontend, &Interrupt::new())
        .await
        .unwrap();
    let payloads = seen.lock().unwrap().clone();
    let pre = payloads
        .iter()
        .find(|p| p["hook_event_name"] == "PreCompact")
        .unwrap();
    assert_eq!(pre["trigger"], "manual");
    assert_eq!(pre["custom_instructions"], "names");
    let post = payloads
        .iter()
        .find(|p| p["hook_event_name"] == "PostCompact")
        .unwrap();
    assert_eq!(post["compact_summary"], "SUMMARY: said hello.");
}

/// A tool source the loop has never heard of, as exec or MCP tools will
/// be: one handler, registered with one line. It stamps its input and
/// remembers what each call was given.
struct Stamp {
    spec: crate::sandbox::ToolSpec,
    seen: Arc<Mutex<Vec<StampCall>>>,
}

/// What one call of [`Stamp`] was given: its id, the session's id, and
/// whether the session's parts came with it.
type StampCall = (String, Option<String>, bool);

impl ToolHandler for Stamp {
    fn name(&self) -> &str {
        "stamp"
    }

    fn spec(&self) -> &crate::sandbox::ToolSpec {
        &self.spec
    }

    fn needs(&self) -> CallNeeds {
        CallNeeds {
            writes_workspace: true,
            granted: vec!["runs `stamp` natively".to_string()],
        }
    }

    fn call<'a>(
        &'a self,
        call: ToolCall<'a>,
    ) -> futures_util::future::LocalBoxFuture<'a, ToolOutcome> {
        self.seen.lock().unwrap().push((
            call.call_id.to_string(),
            call.session_id.map(str::to_string),
            call.session.is_some(),
        ));
        let text = format!("stamped {}", call.input["text"]);
        Box::pin(async move { ToolOutcome::from(Ok(text)) })
    }
}

#[tokio::test]
async fn a_new_tool_source_is_one_handler_and_one_registration() {
    let steps = vec![
        Step::Answer("stamping", vec![("stamp", json!({"text": "hi"}))]),
        Step::Answer("done", Vec::new()),
    ];
    let ws = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(&crate::home::Home::at(compile_cache(), compile_cache())).unwrap();
    let mut toolbox = Toolbox::load(sandbox, &Catalog::builtin(), ws.path(), Limits::default())
        .await
        .unwrap();
    let seen = Arc::default();
    let stamp = Stamp {
        spec: crate::sandbox::ToolSpec {
            name: "stamp".into(),
            description: "Stamps a text.".into(),
            input_schema: json!({"type": "object"}),
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        seen: Arc::clone(&seen),
    };
    toolbox.register(Arc::new(stamp)).unwrap();
    // The `task` tool registers the same way; a second tool the model would
    // call by the same name is refused.
    toolbox
        .register(Arc::new(super::subagent::TaskTool::default()))
        .unwrap();
    assert!(matches!(
        toolbox.register(Arc::new(super::subagent::TaskTool::default())),
        Err(ToolboxError::NameClash { .. })
    ));
    let model = TestModel::new(steps);
    let mut agent = Agent::new(
        Box::new(model.clone()),
        toolbox,
        Policy::new(Mode::Default, Vec::new()),
        AgentConfig::new("test-model", "system"),
        ws.path().to_path_buf(),
        None,
    );
    let mut frontend = TestFrontend {
        answers: [PermissionAnswer::AllowOnce].into(),
        ..TestFrontend::default()
    };
    let report = agent
        .run_turn("go", &mut frontend, &Interrupt::new())
        .await
        .unwrap();
    assert_eq!(report.end, TurnEnd::Finished(StopReason::EndTurn));
    let requests = model.requests();
    assert!(requests[0].tools.iter().any(|t| t.name == "stamp"));
    // It does not say it changes nothing, so the policy asked, naming
    // what the call needs.
    assert_eq!(frontend.asked, ["stamp"]);
    assert!(frontend.asked_needs[0].writes_workspace);
    assert_eq!(frontend.asked_needs[0].granted, ["runs `stamp` natively"]);
    let sent = results(requests[1].messages.last().unwrap());
    assert_eq!(sent, [("call_1_0".into(), "stamped \"hi\"".into(), false)]);
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        [("call_1_0".to_string(), None, true)]
    );
}

#[tokio::test]
async fn a_model_switch_and_added_context_reach_the_next_request() {
    let steps = vec![
        Step::Answer("one", Vec::new()),
        Step::Answer("two", Vec::new()),
    ];
    let mut s = setup(steps, Mode::Default).await;
    s.agent.parts.config.system = "You are capstan.\n- Model: test-model\n- Date: x\n".into();
    let home_dir = tempfile::tempdir().unwrap();
    let home = Home::at(home_dir.path().to_path_buf(), home_dir.path().join("cache"));
    let sessions = crate::session::Sessions::for_workspace(&home, s.ws.path()).unwrap();
    let transcript = sessions.create("test-model", "test").unwrap();
    let path = transcript.path().to_path_buf();
    s.agent.set_transcript(transcript);
    let (mut frontend, interrupt) = (TestFrontend::default(), Interrupt::new());
    s.agent
        .run_turn("first", &mut frontend, &interrupt)
        .await
        .unwrap();
    s.agent.set_model("claude-opus-4-1", None).unwrap();
    s.agent.add_user_context("The user ran `ls`: a.txt".into());
    assert_eq!(s.agent.pending_user_context().len(), 1);
    s.agent
        .run_turn("second", &mut frontend, &interrupt)
        .await
        .unwrap();
    assert!(s.agent.pending_user_context().is_empty());

    let requests = s.model.requests();
    assert_eq!(requests[0].model, "test-model");
    assert_eq!(requests[1].model, "claude-opus-4-1");
    assert!(requests[1].system.contains("- Model: claude-opus-4-1\n"));
    assert!(!requests[1].system.contains("test-model"));
    assert_eq!(s.agent.config().context_window, 200_000);
    let last = requests[1].messages.last().unwrap();
    assert_eq!(text_of(last), "secondThe user ran `ls`: a.txt");
    // The transcript says so, and a load picks the new model up.
    let loaded = crate::session::load::load(&path).unwrap();
    assert_eq!(loaded.model.as_deref(), Some("claude-opus-4-1"));
    assert_eq!(loaded.messages, s.agent.messages());
}
