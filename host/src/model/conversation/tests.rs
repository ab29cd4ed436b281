//! Tests for the conversation rules, their check and the repair.

use serde_json::json;

use super::*;

fn user(text: &str) -> Message {
    Message {
        role: Role::User,
        content: vec![text_block(text)],
    }
}

fn assistant(text: &str) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![text_block(text)],
    }
}

fn text_block(text: &str) -> Block {
    Block::Text { text: text.into() }
}

fn call(id: &str) -> Block {
    Block::ToolUse {
        id: id.into(),
        name: "fs__read".into(),
        input: json!({"path": id}),
    }
}

fn result(id: &str) -> Block {
    Block::ToolResult {
        tool_use_id: id.into(),
        content: format!("contents for {id}"),
        is_error: false,
        images: Vec::new(),
    }
}

fn calls(ids: &[&str]) -> Message {
    Message {
        role: Role::Assistant,
        content: ids.iter().map(|id| call(id)).collect(),
    }
}

fn results(ids: &[&str]) -> Message {
    Message {
        role: Role::User,
        content: ids.iter().map(|id| result(id)).collect(),
    }
}

/// Every text and result content in `messages`, in order.
fn said(messages: &[Message]) -> String {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .map(|block| match block {
            Block::Text { text } => text.clone(),
            Block::ToolResult { content, .. } => content.clone(),
            Block::ToolUse { input, .. } => input.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Repairs a broken conversation and checks the result keeps every rule
/// and still says everything the original said.
fn repair_broken(messages: Vec<Message>) -> (Vec<Message>, Vec<Repair>) {
    assert!(check(&messages).is_err(), "{messages:#?} is valid already");
    let mut repairs = Vec::new();
    let repaired = repair(messages.clone(), &mut repairs);
    assert_eq!(check(&repaired), Ok(()), "{repaired:#?}");
    let after = said(&repaired);
    for block in messages.iter().flat_map(|m| &m.content) {
        let piece = match block {
            Block::Text { text } => text.clone(),
            Block::ToolResult { content, .. } => content.clone(),
            Block::ToolUse { input, .. } => input.to_string(),
        };
        assert!(
            after.contains(&piece),
            "{piece:?} was dropped: {repaired:#?}"
        );
    }
    (repaired, repairs)
}

#[test]
fn a_valid_conversation_passes_and_is_left_alone() {
    let messages = vec![
        user("go"),
        calls(&["a", "b"]),
        results(&["a", "b"]),
        assistant("done"),
        user("more"),
    ];
    assert_eq!(check(&messages), Ok(()));
    assert_eq!(repaired(&messages), None);
}

#[test]
fn a_conversation_starting_with_the_model_gets_a_placeholder_start() {
    let (repaired, repairs) = repair_broken(vec![assistant("hello"), user("hi")]);
    assert_eq!(repaired[0].role, Role::User);
    assert_eq!(repaired[0].content, vec![text_block(MISSING_START)]);
    assert_eq!(repairs, vec![Repair::MissingStart]);
}

#[test]
fn a_repeated_id_in_one_answer_is_renamed_with_its_result() {
    let (repaired, repairs) = repair_broken(vec![
        user("go"),
        calls(&["a", "a"]),
        results(&["a", "a"]),
        assistant("done"),
    ]);
    assert_eq!(repaired[1].content[1], {
        let Block::ToolUse { name, input, .. } = call("a") else {
            unreachable!()
        };
        Block::ToolUse {
            id: "a_2".into(),
            name,
            input,
        }
    });
    assert!(matches!(
        &repaired[2].content[..],
        [Block::ToolResult { tool_use_id: first, .. }, Block::ToolResult { tool_use_id: second, .. }]
            if first == "a" && second == "a_2"
    ));
    assert_eq!(
        repairs,
        vec![Repair::RenamedToolCall {
            id: "a".into(),
            new_id: "a_2".into(),
            name: "fs__read".into()
        }]
    );
}

#[test]
fn an_id_repeated_from_an_earlier_turn_is_renamed_with_its_result() {
    let (repaired, repairs) = repair_broken(vec![
        user("go"),
        calls(&["call_0"]),
        results(&["call_0"]),
        calls(&["call_0"]),
        results(&["call_0"]),
        assistant("done"),
    ]);
    assert!(matches!(&repaired[3].content[0], Block::ToolUse { id, .. } if id == "call_0_2"));
    assert!(
        matches!(&repaired[4].content[0], Block::ToolResult { tool_use_id, .. } if tool_use_id == "call_0_2")
    );
    assert_eq!(repairs.len(), 1, "{repairs:?}");
}

#[test]
fn a_fresh_id_avoids_every_id_already_there() {
    let (repaired, _) = repair_broken(vec![
        user("go"),
        calls(&["a", "a"]),
        results(&["a", "a"]),
        calls(&["a_2"]),
        results(&["a_2"]),
    ]);
    assert!(matches!(&repaired[1].content[1], Block::ToolUse { id, .. } if id == "a_3"));
}

#[test]
fn a_result_without_a_call_becomes_text() {
    let (repaired, repairs) = repair_broken(vec![user("go"), results(&["ghost"]), assistant("ok")]);
    assert_eq!(repaired.len(), 2);
    assert!(
        repaired[0]
            .content
            .iter()
            .all(|b| matches!(b, Block::Text { .. }))
    );
    assert_eq!(
        repairs,
        vec![Repair::OrphanedToolResult {
            tool_use_id: "ghost".into()
        }]
    );
}

#[test]
fn a_call_never_answered_gets_an_interrupted_result() {
    let (repaired, repairs) = repair_broken(vec![user("go"), calls(&["a"]), user("next")]);
    assert!(matches!(
        &repaired[2].content[..],
        [Block::ToolResult { tool_use_id, is_error: true, content, .. }, Block::Text { .. }]
            if tool_use_id == "a" && content == INTERRUPTED_TOOL_RESULT
    ));
    assert_eq!(
        repairs,
        vec![Repair::UnansweredToolCall {
            id: "a".into(),
            name: "fs__read".into()
        }]
    );
}

#[test]
fn messages_of_one_role_in_a_row_merge() {
    let (repaired, _) = repair_broken(vec![
        user("one"),
        user("two"),
        assistant("a"),
        assistant("b"),
    ]);
    assert_eq!(repaired.len(), 2);
    assert_eq!(repaired[0].content.len(), 2);
    assert_eq!(repaired[1].content.len(), 2);
}

#[test]
fn a_result_answering_a_call_twice_keeps_the_first() {
    let (repaired, repairs) = repair_broken(vec![user("go"), calls(&["a"]), results(&["a", "a"])]);
    assert!(
        matches!(&repaired[2].content[0], Block::ToolResult { tool_use_id, .. } if tool_use_id == "a")
    );
    assert!(matches!(&repaired[2].content[1], Block::Text { .. }));
    assert_eq!(repairs.len(), 1);
}

#[test]
fn results_after_text_move_first_and_misplaced_blocks_become_text() {
    let mut late = results(&["a"]);
    late.content.insert(0, text_block("first"));
    repair_broken(vec![user("go"), calls(&["a"]), late]);
    let mut odd = user("go");
    odd.content.push(call("x"));
    let mut odd_answer = assistant("a");
    odd_answer.content.push(result("y"));
    repair_broken(vec![odd, odd_answer]);
}

#[test]
fn empty_blocks_messages_and_ids_are_repaired() {
    let (repaired, _) = repair_broken(vec![
        user("go"),
        Message {
            role: Role::User,
            content: vec![],
        },
        Message {
            role: Role::Assistant,
            content: vec![text_block(""), call("")],
        },
        results(&[""]),
    ]);
    assert!(matches!(&repaired[1].content[..], [Block::ToolUse { id, .. }] if id == "call_2"));
}

#[test]
fn make_call_ids_unique_renames_repeats_in_an_answer_and_of_earlier_turns() {
    let earlier = vec![user("go"), calls(&["call_0"]), results(&["call_0"])];
    let mut answer = vec![text_block("two"), call("call_0"), call("x"), call("x")];
    let renamed = make_call_ids_unique(&mut answer, &earlier);
    assert_eq!(
        renamed,
        vec![
            ("call_0".into(), "call_0_2".into(), "fs__read".into()),
            ("x".into(), "x_2".into(), "fs__read".into()),
        ]
    );
    let mut conversation = earlier;
    conversation.push(Message {
        role: Role::Assistant,
        content: answer,
    });
    conversation.push(results(&["call_0_2", "x", "x_2"]));
    assert_eq!(check(&conversation), Ok(()));
}

/// Random conversations of random blocks over a few ids: the repair
/// always yields one that keeps every rule, and repairing that changes
/// nothing.
#[test]
fn repair_makes_any_conversation_valid() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };
    let ids = ["a", "b", "a_2", "", "c"];
    for round in 0..5000 {
        let length = next(8);
        let mut messages = Vec::new();
        for m in 0..length {
            let role = if next(2) == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let content = (0..next(4))
                .map(|b| match next(3) {
                    0 => text_block(if next(5) == 0 { "" } else { "t" }),
                    1 => call(ids[next(5) as usize]),
                    _ => {
                        let mut block = result(ids[next(5) as usize]);
                        if let Block::ToolResult { content, .. } = &mut block {
                            content.push_str(&format!(" {round}.{m}.{b}"));
                        }
                        block
                    }
                })
                .collect();
            messages.push(Message { role, content });
        }
        let mut repairs = Vec::new();
        let repaired = repair(messages.clone(), &mut repairs);
        assert_eq!(check(&repaired), Ok(()), "{messages:#?}\n->\n{repaired:#?}");
        let mut again = Vec::new();
        assert_eq!(repair(repaired.clone(), &mut again), repaired);
        assert!(again.is_empty(), "{again:?}");
    }
}
