//! Calling skill components: `list`, `load` and `resource` of the
//! `capstan:plugin/skill` interface, each in a fresh instance with the
//! call's grants and limits, like a tool call.

use std::sync::Arc;

use super::bindings::skill_world::{SkillPlugin, SkillPluginPre};
use super::state::CallOptions;
use super::warm::WarmSlot;
use super::{CallError, Instantiate, LoadError, Sandbox, instantiate_with, run_with};

/// What a skill component says about one of its skills.
pub use super::bindings::skill_world::exports::capstan::plugin::skill::SkillMeta as WitSkillMeta;

/// A skill component compiled and linked, ready to be instantiated per call.
pub struct SkillComponent {
    name: Arc<str>,
    sha256: String,
    pre: SkillPluginPre<super::CallState>,
}

impl SkillComponent {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The SHA-256 of the component's bytes.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// How a call makes its instance.
    fn instantiate(&self) -> Instantiate<SkillPlugin> {
        let pre = self.pre.clone();
        instantiate_with(move |store| Box::pin(async move { pre.instantiate_async(store).await }))
    }
}

impl Sandbox {
    /// Loads a component that exports `capstan:plugin/skill`, from the
    /// compile cache when possible.
    pub fn load_skill_component(
        &self,
        name: &str,
        wasm: &[u8],
        sha256: Option<&str>,
        origin: &str,
    ) -> Result<SkillComponent, LoadError> {
        let (pre, sha256, _) = self.link(wasm, sha256, origin)?;
        let pre = SkillPluginPre::new(pre).map_err(|e| LoadError::Incompatible {
            origin: origin.to_string(),
            reason: format!(
                "it does not export the skill interface capstan:plugin/skill@0.1.0 ({e:#})"
            ),
        })?;
        Ok(SkillComponent {
            name: Arc::from(name),
            sha256,
            pre,
        })
    }

    /// Asks a skill component which skills it offers. Runs with no grants
    /// and a short deadline.
    pub async fn list_skills(
        &self,
        component: &SkillComponent,
    ) -> Result<Vec<WitSkillMeta>, CallError> {
        let options = CallOptions::listing();
        self.in_fresh_instance(
            &component.name,
            None::<&WarmSlot<SkillPlugin>>,
            &options,
            component.instantiate(),
            run_with(|plugin: SkillPlugin, store, _| {
                Box::pin(async move { plugin.capstan_plugin_skill().call_list(store).await })
            }),
        )
        .await
    }

    /// Runs `load(name, arguments)` in a fresh instance under `options`.
    pub async fn load_skill(
        &self,
        component: &SkillComponent,
        name: &str,
        arguments: &str,
        options: &CallOptions,
    ) -> Result<String, CallError> {
        let (name, arguments) = (name.to_string(), arguments.to_string());
        let settled = self
            .in_fresh_instance(
                &component.name,
                None::<&WarmSlot<SkillPlugin>>,
                options,
                component.instantiate(),
                run_with(move |plugin: SkillPlugin, store, _| {
                    Box::pin(async move {
                        plugin
                            .capstan_plugin_skill()
                            .call_load(store, &name, &arguments)
                            .await
                    })
                }),
            )
            .await;
        let text = settled?.map_err(CallError::Failed)?;
        within_output_limit(component, text, options)
    }

    /// Runs `resource(name, path)` in a fresh instance under `options`.
    pub async fn skill_resource(
        &self,
        component: &SkillComponent,
        name: &str,
        path: &str,
        options: &CallOptions,
    ) -> Result<Vec<u8>, CallError> {
        let (name, path) = (name.to_string(), path.to_string());
        let settled = self
            .in_fresh_instance(
                &component.name,
                None::<&WarmSlot<SkillPlugin>>,
                options,
                component.instantiate(),
                run_with(move |plugin: SkillPlugin, store, _| {
                    Box::pin(async move {
                        plugin
                            .capstan_plugin_skill()
                            .call_resource(store, &name, &path)
                            .await
                    })
                }),
            )
            .await;
        let bytes = settled?.map_err(CallError::Failed)?;
        within_output_limit(component, bytes, options)
    }
}

/// `output`, unless it is larger than the call's output limit.
fn within_output_limit<T: AsRef<[u8]>>(
    component: &SkillComponent,
    output: T,
    options: &CallOptions,
) -> Result<T, CallError> {
    let size = output.as_ref().len();
    if size > options.limits.output {
        return Err(CallError::OutputTooLarge {
            plugin: component.name.to_string(),
            size: size as u64,
            limit: options.limits.output as u64,
        });
    }
    Ok(output)
}
