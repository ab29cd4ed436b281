//! Questions capstan asks the program that drives a print-mode session
//! over stdin and stdout (`--input-format stream-json
//! --permission-prompt-tool stdio`), as Claude Code asks its SDK: a
//! `control_request` line on stdout,
//! `{"type":"control_request","request_id":ID,"request":{"subtype":"can_use_tool",...}}`,
//! answered by a `control_response` line on stdin with the same id,
//! `{"type":"control_response","response":{"subtype":"success","request_id":ID,"response":{...}}}`
//! (or `"subtype":"error"` with an `error`). The stdin reader hands such
//! lines here; the question's asker waits for its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::render::StreamJsonFrontend;

/// The questions waiting for the driver's answer.
#[derive(Clone, Default)]
pub struct DriverQuestions {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    pending: HashMap<String, oneshot::Sender<Result<Value, String>>>,
    asked: u64,
    closed: bool,
}

/// What a `control_response` line was, for the stdin reader.
#[derive(Debug, PartialEq)]
pub enum Delivery {
    /// Not a control response: the line is something else.
    NotAResponse,
    /// The answer to a question waiting for it.
    Delivered,
    /// A response to no question capstan asked (or one already answered).
    Unexpected(String),
}

impl DriverQuestions {
    /// Sends `request` (the `request` object of a control request) to the
    /// driver; the answer is its response body, or why there is none.
    pub async fn ask(&self, request: Value) -> Result<Value, String> {
        let (sender, receiver) = oneshot::channel();
        let id = {
            let Ok(mut state) = self.state.lock() else {
                return Err("the driver's answers can no longer be read".into());
            };
            if state.closed {
                return Err("the driver closed stdin, so it cannot answer".into());
            }
            state.asked += 1;
            let id = format!("capstan-{}-{}", std::process::id(), state.asked);
            state.pending.insert(id.clone(), sender);
            id
        };
        StreamJsonFrontend::emit(&json!({
            "type": "control_request",
            "request_id": id,
            "request": request,
        }));
        let answer = receiver
            .await
            .unwrap_or_else(|_| Err("the driver closed stdin before answering".into()));
        if let Ok(mut state) = self.state.lock() {
            state.pending.remove(&id);
        }
        answer
    }

    /// Hands `line` to the question it answers, if it is a control
    /// response.
    pub fn deliver(&self, line: &Value) -> Delivery {
        if line.get("type").and_then(Value::as_str) != Some("control_response") {
            return Delivery::NotAResponse;
        }
        let response = line.get("response").unwrap_or(&Value::Null);
        let Some(id) = response.get("request_id").and_then(Value::as_str) else {
            return Delivery::Unexpected(
                "a control_response needs `response.request_id`, the id of the request it answers"
                    .into(),
            );
        };
        let answer = match response.get("subtype").and_then(Value::as_str) {
            Some("success") => Ok(response.get("response").cloned().unwrap_or(json!({}))),
            Some("error") => Err(format!(
                "the driver answered with an error: {}",
                response
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("(no message)")
            )),
            _ => Err(
                "the driver's control_response has a `subtype` other than success or error".into(),
            ),
        };
        let sender = self
            .state
            .lock()
            .ok()
            .and_then(|mut state| state.pending.remove(id));
        match sender {
            Some(sender) => {
                let _ = sender.send(answer);
                Delivery::Delivered
            }
            None => Delivery::Unexpected(format!(
                "a control_response for `{id}`, which is no request waiting for an answer"
            )),
        }
    }

    /// The driver's input ended: questions waiting, and later ones, get
    /// no answer.
    pub fn close(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.closed = true;
            state.pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_answer_reaches_its_question_and_others_are_named() {
        let questions = DriverQuestions::default();
        assert_eq!(
            questions.deliver(&json!({"type": "user"})),
            Delivery::NotAResponse
        );
        let asking = {
            let questions = questions.clone();
            tokio::spawn(async move { questions.ask(json!({"subtype": "can_use_tool"})).await })
        };
        // The id is the process's and the first question's.
        let id = format!("capstan-{}-1", std::process::id());
        let mut delivered = Delivery::NotAResponse;
        for _ in 0..1000 {
            delivered = questions.deliver(&json!({
                "type": "control_response",
                "response": {"subtype": "success", "request_id": id, "response": {"behavior": "allow"}},
            }));
            if delivered == Delivery::Delivered {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(delivered, Delivery::Delivered);
        assert_eq!(asking.await.unwrap(), Ok(json!({"behavior": "allow"})));
        assert!(matches!(
            questions.deliver(&json!({
                "type": "control_response",
                "response": {"subtype": "success", "request_id": id, "response": {}},
            })),
            Delivery::Unexpected(_)
        ));
    }

    #[tokio::test]
    async fn a_closed_input_answers_no_question() {
        let questions = DriverQuestions::default();
        questions.close();
        let answer = questions.ask(json!({"subtype": "can_use_tool"})).await;
        assert!(answer.unwrap_err().contains("closed stdin"));
    }
}
