//! Choosing the model: which provider, which model id, where it is, which
//! key. Command-line flags win, then environment variables, then the config
//! files, then defaults.

use std::path::Path;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::config::ModelSettings;
use crate::model::Provider;
use crate::model::anthropic::{AnthropicConfig, AnthropicProvider};
use crate::model::openai::{OpenAiConfig, OpenAiProvider};
use crate::model::retry::DEFAULT_RESPONSE_TIMEOUT;
use crate::model::scripted::ScriptedProvider;
use crate::quantity::parse_duration;

/// The model given when none is configured, per provider.
const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
const DEFAULT_OPENAI_MODEL: &str = "gpt-4o";
const DEFAULT_MAX_TOKENS: u32 = 8192;

/// Which API the model is behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProviderKind {
    /// The Anthropic Messages API.
    Anthropic,
    /// Any OpenAI-compatible Chat Completions API (OpenAI, OpenRouter,
    /// llama.cpp, vLLM, Ollama).
    Openai,
}

/// The flags that choose the model.
#[derive(Debug, Clone, Args)]
pub struct ModelFlags {
    /// The model id, or `scripted:FILE` for an offline replay of a scripted
    /// conversation (no API key needed).
    #[arg(long, short = 'm', value_name = "MODEL")]
    pub model: Option<String>,

    /// The API the model is behind [default: anthropic when ANTHROPIC_API_KEY
    /// is set, openai when OPENAI_BASE_URL or OPENAI_API_KEY is].
    #[arg(long, value_enum)]
    pub provider: Option<ProviderKind>,

    /// The API's base URL (e.g. http://127.0.0.1:8080/v1 for a local
    /// server) [env: ANTHROPIC_BASE_URL or OPENAI_BASE_URL].
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// The environment variable holding the API key [default:
    /// ANTHROPIC_API_KEY or OPENAI_API_KEY].
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,

    /// The most tokens one answer may have [default: 8192].
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
}

/// The chosen model.
pub struct ModelChoice {
    /// The provider.
    pub provider: Box<dyn Provider>,
    /// The model id.
    pub model: String,
    /// The most tokens one answer may have.
    pub max_tokens: u32,
    /// How to name it to the user.
    pub label: String,
    /// The environment variable the API key came from, if one did.
    pub key_source: Option<String>,
}

/// Chooses the model from the flags, the environment and the settings.
pub fn choose(flags: &ModelFlags, settings: &ModelSettings) -> Result<ModelChoice, String> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let max_tokens = flags
        .max_tokens
        .or(settings.max_tokens)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    if max_tokens == 0 {
        return Err("--max-tokens must be at least 1".to_string());
    }
    let model_flag = flags.model.clone();
    if let Some(file) = model_flag
        .as_deref()
        .and_then(|m| m.strip_prefix("scripted:"))
    {
        let provider = ScriptedProvider::from_file(Path::new(file)).map_err(|e| e.to_string())?;
        return Ok(ModelChoice {
            provider: Box::new(provider),
            model: "scripted".to_string(),
            max_tokens,
            label: format!("scripted model (offline replay of {file}; not a real model)"),
            key_source: None,
        });
    }
    let kind = match (flags.provider, settings.provider.as_deref()) {
        (Some(kind), _) => kind,
        (None, Some("anthropic")) => ProviderKind::Anthropic,
        (None, Some("openai" | "openai-compatible")) => ProviderKind::Openai,
        (None, Some(other)) => {
            return Err(format!(
                "the config names provider `{other}`; use \"anthropic\" or \"openai\""
            ));
        }
        (None, None) => {
            let key_var = flags
                .api_key_env
                .as_deref()
                .or(settings.api_key_env.as_deref());
            if key_var.is_some_and(|v| v.starts_with("OPENAI"))
                || (env("ANTHROPIC_API_KEY").is_none()
                    && (env("OPENAI_BASE_URL").is_some() || env("OPENAI_API_KEY").is_some()))
            {
                ProviderKind::Openai
            } else {
                ProviderKind::Anthropic
            }
        }
    };
    match kind {
        ProviderKind::Anthropic => {
            let key_var = flags
                .api_key_env
                .clone()
                .or_else(|| settings.api_key_env.clone())
                .unwrap_or_else(|| "ANTHROPIC_API_KEY".to_string());
            let Some(key) = env(&key_var) else {
                return Err(format!(
                    "no API key: set {key_var} (or point OPENAI_BASE_URL at an OpenAI-compatible server), or try the offline demo: capstan --model scripted:docs/demo/script.json"
                ));
            };
            let base_url = flags
                .base_url
                .clone()
                .or_else(|| env("ANTHROPIC_BASE_URL"))
                .or_else(|| settings.base_url.clone());
            let mut config = AnthropicConfig::new(key);
            let key_source = Some(key_var.clone());
            config.key_var = key_var;
            config.retry.response_timeout = response_timeout(settings)?;
            config.retry.max_retries = max_retries(settings, &env)?;
            if let Some(url) = base_url {
                config.base_url = url;
            }
            let model = model_flag
                .or_else(|| env("ANTHROPIC_MODEL"))
                .or_else(|| settings.name.clone())
                .unwrap_or_else(|| DEFAULT_ANTHROPIC_MODEL.to_string());
            let label = format!("{model} (anthropic, {})", config.base_url);
            let provider = AnthropicProvider::new(config).map_err(|e| e.to_string())?;
            Ok(ModelChoice {
                provider: Box::new(provider),
                model,
                max_tokens,
                label,
                key_source,
            })
        }
        ProviderKind::Openai => {
            let key_var = flags
                .api_key_env
                .clone()
                .or_else(|| settings.api_key_env.clone())
                .unwrap_or_else(|| "OPENAI_API_KEY".to_string());
            let base_url = flags
                .base_url
                .clone()
                .or_else(|| env("OPENAI_BASE_URL"))
                .or_else(|| settings.base_url.clone())
                .unwrap_or_else(|| "https://api.openai.com/v1".to_string());
            let mut config = OpenAiConfig::new(base_url);
            config.retry.response_timeout = response_timeout(settings)?;
            config.retry.max_retries = max_retries(settings, &env)?;
            config.api_key = env(&key_var);
            let key_source = config.api_key.as_ref().map(|_| key_var.clone());
            config.key_var = key_var;
            let model = model_flag
                .or_else(|| env("OPENAI_MODEL"))
                .or_else(|| settings.name.clone())
                .unwrap_or_else(|| DEFAULT_OPENAI_MODEL.to_string());
            let label = format!("{model} (openai-compatible, {})", config.base_url);
            let provider = OpenAiProvider::new(config).map_err(|e| e.to_string())?;
            Ok(ModelChoice {
                provider: Box::new(provider),
                model,
                max_tokens,
                label,
                key_source,
            })
        }
    }
}

/// The variables that set how many times a failed model request is
/// retried, first found wins: capstan's, then Claude Code's.
pub const MAX_RETRIES_VARS: [&str; 2] = ["CAPSTAN_MAX_RETRIES", "CLAUDE_CODE_MAX_RETRIES"];

/// How many times a failed request is retried: [`MAX_RETRIES_VARS`], else
/// `[model] max_retries`, else the retry policy's default (0: no retry).
fn max_retries(
    settings: &ModelSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<u32, String> {
    for var in MAX_RETRIES_VARS {
        if let Some(text) = env(var) {
            return text.trim().parse::<u32>().map_err(|_| {
                format!(
                    "{var}={text} is not a number of retries; give a whole number such as 4, or 0 for none"
                )
            });
        }
    }
    Ok(settings
        .max_retries
        .unwrap_or(crate::model::retry::RetryPolicy::default().max_retries))
}

/// How long to wait for a response to start: `[model] response_timeout`,
/// else the default.
fn response_timeout(settings: &ModelSettings) -> Result<Duration, String> {
    let Some(text) = settings.response_timeout.as_deref() else {
        return Ok(DEFAULT_RESPONSE_TIMEOUT);
    };
    match parse_duration(text) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        Ok(_) => Err(format!(
            "[model] response_timeout = \"{text}\" would give the server no time; write a duration such as \"300s\" or \"5m\""
        )),
        Err(reason) => Err(format!("[model] response_timeout: {reason}")),
    }
}
