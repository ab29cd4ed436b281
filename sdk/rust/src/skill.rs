//! Declaring skills whose text is computed, and answering the host's
//! `list`, `load` and `resource` calls for them.
//!
//! Plain instructions need no code: a `SKILL.md` folder is a skill. Write a
//! skill component when the text depends on something only code can
//! find out — the workspace's files (within the plugin's grants), the date,
//! an API — or when the arguments need more than `$ARGUMENTS` substitution.

use std::borrow::Cow;

use crate::skill_bindings::exports::capstan::plugin::skill::SkillMeta;

type Loader = Box<dyn Fn(&Arguments) -> Result<String, String>>;

/// The arguments a skill was run with: `/name 1.2.0 "last week"` gives
/// `1.2.0` and `last week`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arguments {
    all: String,
    words: Vec<String>,
}

impl Arguments {
    /// Parses arguments as typed: whitespace separates words, double or
    /// single quotes keep spaces inside one.
    pub fn parse(all: &str) -> Self {
        let words = crate::arguments::split(all);
        Self {
            all: all.trim().to_string(),
            words,
        }
    }

    /// Everything, as typed.
    pub fn all(&self) -> &str {
        &self.all
    }

    /// The `index`-th word (from 0), if given.
    pub fn get(&self, index: usize) -> Option<&str> {
        self.words.get(index).map(String::as_str)
    }

    /// Every word.
    pub fn words(&self) -> &[String] {
        &self.words
    }
}

/// One skill: what the model and the user see before it is loaded, and a
/// function that writes its text.
pub struct Skill {
    name: Cow<'static, str>,
    description: Cow<'static, str>,
    when_to_use: Option<String>,
    argument_hint: Option<String>,
    user_invocable: bool,
    model_invocable: bool,
    allowed_tools: Vec<String>,
    resources: Vec<(String, Cow<'static, [u8]>)>,
    loader: Loader,
}

impl Skill {
    /// Declares skill `name` (lowercase letters, digits and `-`), described
    /// for the model by `description`, whose text `load` writes from the
    /// arguments. An `Err` tells the model why the skill could not load.
    pub fn new<F>(
        name: impl Into<Cow<'static, str>>,
        description: impl Into<Cow<'static, str>>,
        load: F,
    ) -> Self
    where
        F: Fn(&Arguments) -> Result<String, String> + 'static,
    {
        Self {
            name: name.into(),
            description: description.into(),
            when_to_use: None,
            argument_hint: None,
            user_invocable: true,
            model_invocable: true,
            allowed_tools: Vec::new(),
            resources: Vec::new(),
            loader: Box::new(load),
        }
    }

    /// Says when the model should reach for it.
    pub fn when_to_use(mut self, text: impl Into<String>) -> Self {
        self.when_to_use = Some(text.into());
        self
    }

    /// A hint for the arguments, shown to the user (`[version]`).
    pub fn argument_hint(mut self, hint: impl Into<String>) -> Self {
        self.argument_hint = Some(hint.into());
        self
    }

    /// Only these tools (`fs.read`, `fs.*`) run while the skill is active.
    pub fn allowed_tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allowed_tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// Only the user can run it (as `/name`); the model is not told of it.
    pub fn user_only(mut self) -> Self {
        self.model_invocable = false;
        self
    }

    /// Only the model can load it; the user cannot run it as `/name`.
    pub fn model_only(mut self) -> Self {
        self.user_invocable = false;
        self
    }

    /// A supporting file the model can ask for by `path`.
    pub fn resource(
        mut self,
        path: impl Into<String>,
        content: impl Into<Cow<'static, [u8]>>,
    ) -> Self {
        self.resources.push((path.into(), content.into()));
        self
    }

    /// The skill's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Writes the skill's text for `arguments`, as the host would ask.
    pub fn load(&self, arguments: &str) -> Result<String, String> {
        (self.loader)(&Arguments::parse(arguments))
    }
}

/// Implements `list`.
pub fn list(skills: &[Skill]) -> Vec<SkillMeta> {
    skills
        .iter()
        .map(|s| SkillMeta {
            name: s.name.to_string(),
            description: s.description.to_string(),
            when_to_use: s.when_to_use.clone(),
            argument_hint: s.argument_hint.clone(),
            user_invocable: s.user_invocable,
            model_invocable: s.model_invocable,
            allowed_tools: s.allowed_tools.clone(),
        })
        .collect()
}

fn find<'a>(skills: &'a [Skill], name: &str) -> Result<&'a Skill, String> {
    skills.iter().find(|s| s.name == name).ok_or_else(|| {
        let known: Vec<&str> = skills.iter().map(Skill::name).collect();
        format!(
            "unknown skill `{name}`; this plugin offers: {}",
            known.join(", ")
        )
    })
}

/// Implements `load`.
pub fn load(skills: &[Skill], name: &str, arguments: &str) -> Result<String, String> {
    find(skills, name)?.load(arguments)
}

/// Implements `resource`.
pub fn resource(skills: &[Skill], name: &str, path: &str) -> Result<Vec<u8>, String> {
    let skill = find(skills, name)?;
    let path = path.trim_start_matches("./");
    skill
        .resources
        .iter()
        .find(|(p, _)| p == path)
        .map(|(_, bytes)| bytes.to_vec())
        .ok_or_else(|| {
            let known: Vec<&str> = skill.resources.iter().map(|(p, _)| p.as_str()).collect();
            format!(
                "skill `{name}` has no file {path}; it has: {}",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skills() -> Vec<Skill> {
        vec![
            Skill::new("notes", "Release notes.", |args: &Arguments| {
                Ok(format!("notes for {}", args.get(0).unwrap_or("?")))
            })
            .argument_hint("[version]")
            .resource("template.md", &b"# Template"[..])
            .user_only(),
        ]
    }

    #[test]
    fn lists_loads_and_serves_resources() {
        let skills = skills();
        let meta = list(&skills);
        assert_eq!(meta[0].name, "notes");
        assert!(meta[0].user_invocable && !meta[0].model_invocable);
        assert_eq!(meta[0].argument_hint.as_deref(), Some("[version]"));
        assert_eq!(
            load(&skills, "notes", "\"1.2 beta\" x").unwrap(),
            "notes for 1.2 beta"
        );
        assert!(
            load(&skills, "nope", "")
                .unwrap_err()
                .contains("offers: notes")
        );
        assert_eq!(
            resource(&skills, "notes", "./template.md").unwrap(),
            b"# Template"
        );
        assert!(
            resource(&skills, "notes", "other.md")
                .unwrap_err()
                .contains("template.md")
        );
    }
}
