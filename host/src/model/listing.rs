//! Which models a provider offers (`/model` lists them): asked of the
//! server where its API says (Anthropic's `/v1/models`, an
//! OpenAI-compatible server's `/models`, which llama.cpp, vLLM and Ollama
//! serve too), else the models capstan knows for that provider.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// The models a provider offers, or why the server could not say.
pub type ModelListFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<String>, String>> + Send + 'a>>;

/// How long a listing may take: it is asked for while the user waits.
const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// The most model ids kept from a server's answer.
const MAX_MODELS: usize = 200;

/// Sends `request` (a GET of the API's model list) and reads the ids of
/// its `data` array, as both APIs answer.
pub async fn fetch_ids(request: reqwest::RequestBuilder, url: &str) -> Result<Vec<String>, String> {
    let response = request
        .timeout(LIST_TIMEOUT)
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {e}"))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("{url} answered {status}"));
    }
    let body: serde_json::Value = response
        .json()
        .await
        .map_err(|e| format!("{url} did not answer with a model list: {e}"))?;
    parse_ids(&body).ok_or_else(|| format!("{url} did not answer with a model list"))
}

/// The ids of a `{"data": [{"id": ...}, ...]}` answer, sorted.
pub fn parse_ids(body: &serde_json::Value) -> Option<Vec<String>> {
    let mut ids: Vec<String> = body
        .get("data")?
        .as_array()?
        .iter()
        .filter_map(|model| model.get("id")?.as_str())
        .filter(|id| !id.is_empty() && id.len() <= 200)
        .take(MAX_MODELS)
        .map(str::to_string)
        .collect();
    ids.sort();
    ids.dedup();
    Some(ids)
}

/// The models capstan knows for a provider (by its name), for when the
/// server cannot be asked.
pub fn well_known(provider: &str) -> &'static [&'static str] {
    match provider {
        "anthropic" => &[
            "claude-opus-4-1",
            "claude-opus-4-0",
            "claude-sonnet-4-5",
            "claude-sonnet-4-0",
            "claude-haiku-4-5",
            "claude-3-5-haiku-latest",
        ],
        "openai-compatible" => &[
            "gpt-5",
            "gpt-5-mini",
            "gpt-4.1",
            "gpt-4.1-mini",
            "gpt-4o",
            "gpt-4o-mini",
            "o3",
            "o4-mini",
        ],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_are_read_from_the_data_array() {
        let body = json!({ "object": "list", "data": [
            { "id": "qwen3-coder", "object": "model" },
            { "id": "llama-3.1-8b" },
            { "object": "model" },
            { "id": "qwen3-coder" }
        ]});
        assert_eq!(parse_ids(&body).unwrap(), ["llama-3.1-8b", "qwen3-coder"]);
        assert_eq!(parse_ids(&json!({ "error": "no" })), None);
        assert!(well_known("anthropic").contains(&"claude-sonnet-4-5"));
        assert!(well_known("scripted").is_empty());
    }
}
