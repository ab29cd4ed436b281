//! How capstan ends when told to: SIGTERM and SIGHUP (a closed terminal),
//! and a second Ctrl-C, end the process at once — after removing the
//! temporary folders and homes its commands had, which would otherwise be
//! left behind in `$TMPDIR` (the commands themselves die with capstan).

/// Ends the process with `code` at once, after removing the commands'
/// temporary area; the transcript is written as it goes, so nothing else
/// is lost.
pub fn exit_now(code: i32) -> ! {
    remove_temporary_area();
    std::process::exit(code)
}

/// Removes what commands had in the temporary area (at the end of a
/// command that exits normally too).
pub fn remove_temporary_area() {
    #[cfg(target_os = "linux")]
    crate::exec::temp_area::remove_area();
}

/// Watches SIGTERM and SIGHUP on a thread of its own, for the whole
/// process: either ends it through [`exit_now`] with the shell's code for
/// the signal (143, 129).
pub fn watch_signals() {
    watch_signals_and_interrupts(None);
}

/// [`watch_signals`], and on the same thread calls `on_interrupt` at each
/// SIGINT (Ctrl-C) when given: one thread for all of a command's signals.
pub fn watch_signals_and_interrupts(on_interrupt: Option<Box<dyn Fn() + Send>>) {
    let _ = std::thread::Builder::new()
        .name("capstan-signals".into())
        .spawn(move || {
            use tokio::signal::unix::{SignalKind, signal};
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                let (Ok(mut term), Ok(mut hup)) = (
                    signal(SignalKind::terminate()),
                    signal(SignalKind::hangup()),
                ) else {
                    return;
                };
                let mut interrupts = match &on_interrupt {
                    Some(_) => signal(SignalKind::interrupt()).ok(),
                    None => None,
                };
                // 128 + the signal's number, as a shell reports it.
                let code = loop {
                    tokio::select! {
                        _ = term.recv() => break 128 + 15,
                        _ = hup.recv() => break 128 + 1,
                        Some(()) = async {
                            match interrupts.as_mut() {
                                Some(interrupts) => interrupts.recv().await,
                                None => std::future::pending().await,
                            }
                        } => {
                            if let Some(on_interrupt) = &on_interrupt {
                                on_interrupt();
                            }
                        }
                    }
                };
                exit_now(code);
            });
        });
}
