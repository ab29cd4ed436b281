//! `/model`: the model in use, the models the provider offers, and a
//! switch to another for the rest of the session (recorded in the
//! transcript, so a resumed session goes on with it).

use crate::cli::escape;
use crate::cli::setup::Session;
use crate::model::listing;

/// Runs `/model [NAME|N]`.
pub async fn run(session: &mut Session, argument: &str) {
    let chosen = match argument.parse::<usize>() {
        Err(_) if !argument.is_empty() => argument.to_string(),
        number => {
            let (models, note) = known_models(session).await;
            let Ok(n) = number else {
                show(session, &models, note.as_deref());
                return;
            };
            match n.checked_sub(1).and_then(|i| models.get(i)) {
                Some(model) => model.clone(),
                None => {
                    eprintln!(
                        "error: there is no model {n} in the list (1 to {}); /model lists them",
                        models.len()
                    );
                    return;
                }
            }
        }
    };
    if chosen.chars().any(|c| c.is_whitespace() || c.is_control()) || chosen.len() > 200 {
        eprintln!(
            "error: `{}` is not a model id; /model lists them",
            escape::line(&chosen)
        );
        return;
    }
    if chosen == session.agent.config().model {
        eprintln!("already using {}", escape::line(&chosen));
        return;
    }
    let previous = session.agent.config().model.clone();
    match session
        .agent
        .set_model(&chosen, session.context_window_setting)
    {
        Ok(()) => eprintln!(
            "model: {} from the next prompt on, instead of {}",
            escape::line(&chosen),
            escape::line(&previous)
        ),
        Err(e) => eprintln!("error: {}", escape::message(&e.to_string())),
    }
}

/// The models to offer: the server's list, else the well-known ones with a
/// note saying why.
async fn known_models(session: &Session) -> (Vec<String>, Option<String>) {
    let provider = session.agent.provider_name().to_string();
    let fallback = || {
        listing::well_known(&provider)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    match session.agent.provider().list_models().await {
        Ok(models) if !models.is_empty() => (models, None),
        Ok(_) if provider == "scripted" => (
            Vec::new(),
            Some("the scripted model replays its script whatever model is named".to_string()),
        ),
        Ok(_) => (fallback(), None),
        Err(why) => (
            fallback(),
            Some(format!(
                "the server's list is unavailable ({why}); these are the models capstan knows"
            )),
        ),
    }
}

fn show(session: &Session, models: &[String], note: Option<&str>) {
    let agent = &session.agent;
    let current = &agent.config().model;
    eprintln!(
        "model: {} ({}, context window {} tokens)",
        escape::line(current),
        agent.provider_name(),
        agent.config().context_window
    );
    if let Some(note) = note {
        eprintln!("{}", escape::message(note));
    }
    if models.is_empty() {
        eprintln!("/model NAME switches to another model of this provider");
        return;
    }
    eprintln!("models of {}:", agent.provider_name());
    for (n, model) in models.iter().enumerate() {
        let mark = if model == current { "*" } else { " " };
        eprintln!("{mark} {:>2}. {}", n + 1, escape::line(model));
    }
    eprintln!("/model NAME or /model N switches for the rest of this session");
}
