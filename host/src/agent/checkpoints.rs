//! The session's checkpoints as the loop keeps them: one per prompt the
//! user submits, begun just before its record is written, and the changes
//! found after each batch of calls that may write. A failing store never
//! fails the turn: the user is told that the prompt cannot be rewound.

use super::{Agent, AgentError, AgentEvent, Frontend};
use crate::session::TranscriptWriter;
use crate::session::checkpoint::{
    Change, CheckpointError, CheckpointStore, RestoreReport, RewindScope,
};

/// Why a rewind failed.
#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    /// The session has no transcript, so nothing to rewind.
    #[error("this session is not saved, so it has no checkpoints to rewind to")]
    NotSaved,
    /// The checkpoint store failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The shortened transcript could not be reopened.
    #[error(transparent)]
    Agent(#[from] AgentError),
}

impl Agent {
    /// Starts the checkpoint of the prompt about to be recorded, whose
    /// records begin at `offset` in the transcript.
    pub(super) fn begin_checkpoint(
        &mut self,
        prompt: &str,
        offset: Option<u64>,
        frontend: &mut dyn Frontend,
    ) {
        let (Some(store), Some(offset)) = (&mut self.checkpoints, offset) else {
            return;
        };
        if let Err(e) = store.begin_prompt(prompt, offset) {
            frontend.event(AgentEvent::Notice(&format!(
                "checkpoint failed: {e}; this prompt cannot be rewound"
            )));
        }
    }

    /// Takes in what changed since the last walk (another session, the
    /// user's editor) without giving it to the prompt; call it just before
    /// running calls, then [`Agent::record_checkpoint_changes`] after them,
    /// so the prompt holds only what changed while they ran.
    pub fn note_outside_checkpoint_changes(&mut self, frontend: &mut dyn Frontend) {
        let Some(store) = &mut self.checkpoints else {
            return;
        };
        if let Err(e) = store.note_outside_changes() {
            frontend.event(AgentEvent::Notice(&format!(
                "checkpoint failed: {e}; this prompt's changes cannot be rewound"
            )));
        }
    }

    /// Finds what the calls just run changed and adds it to the prompt's
    /// checkpoint. Call it after running something for the user outside a
    /// turn (`!cmd`) too, so its changes can be rewound.
    pub fn record_checkpoint_changes(&mut self, frontend: &mut dyn Frontend) -> Vec<Change> {
        let Some(store) = &mut self.checkpoints else {
            return Vec::new();
        };
        match store.record_changes() {
            Ok(changes) => changes,
            Err(e) => {
                frontend.event(AgentEvent::Notice(&format!(
                    "checkpoint failed: {e}; this prompt's changes cannot be rewound"
                )));
                Vec::new()
            }
        }
    }

    /// Saves what the checkpoints know of the workspace when a turn ends.
    pub(super) fn flush_checkpoints(&mut self, frontend: &mut dyn Frontend) {
        if let Some(store) = &mut self.checkpoints
            && let Err(e) = store.flush()
        {
            frontend.event(AgentEvent::Notice(&format!("checkpoint failed: {e}")));
        }
    }

    /// The session's checkpoint store, if it is saved.
    pub fn checkpoints(&mut self) -> Option<&mut CheckpointStore> {
        self.checkpoints.as_mut()
    }

    /// Rewinds to just before prompt `number`: the files, the conversation
    /// or both (see [`CheckpointStore::rewind`]). A rewound conversation
    /// goes on from the shortened transcript.
    pub fn rewind(
        &mut self,
        number: u32,
        scope: RewindScope,
        force: bool,
    ) -> Result<RestoreReport, RewindError> {
        let (Some(store), Some(transcript)) = (&mut self.checkpoints, &self.transcript) else {
            return Err(RewindError::NotSaved);
        };
        let path = transcript.path().to_path_buf();
        let report = store.rewind(&path, number, scope, force)?;
        if report.conversation_rewound {
            let (writer, loaded) = TranscriptWriter::reopen(&path).map_err(AgentError::from)?;
            self.transcript = Some(writer);
            self.messages = loaded.messages;
            self.context_tokens = None;
        }
        Ok(report)
    }
}
