//! The interactive shell of `flotilla sql` and `flotilla local`: rustyline with a
//! history file, statements that may span lines and end with `;`. A failed query
//! prints its error and the shell goes on.

use rustyline::error::ReadlineError;
use rustyline::DefaultEditor;

use crate::client::{ClientError, StatementClient};
use crate::format::{format_rows, OutputFormat};

fn history_path() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".flotilla_history"))
}

/// Runs the shell until `quit`, `exit` or end of input.
pub async fn repl(client: StatementClient, format: OutputFormat) -> Result<(), String> {
    let mut editor = DefaultEditor::new().map_err(|e| format!("cannot start the shell: {e}"))?;
    if let Some(p) = history_path() {
        let _ = editor.load_history(&p);
    }
    let mut buffer = String::new();
    loop {
        let prompt = if buffer.is_empty() { "flotilla> " } else { "       -> " };
        let line = match tokio::task::block_in_place(|| editor.readline(prompt)) {
            Ok(l) => l,
            Err(ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(format!("shell input failed: {e}")),
        };
        let trimmed = line.trim();
        if buffer.is_empty() && matches!(trimmed.to_lowercase().as_str(), "quit" | "exit" | "quit;" | "exit;") {
            break;
        }
        buffer.push_str(&line);
        buffer.push('\n');
        if !trimmed.ends_with(';') {
            continue;
        }
        let _ = editor.add_history_entry(buffer.trim());
        for sql in crate::local::split_statements(&buffer) {
            let canceller = client.clone();
            let outcome = tokio::select! {
                r = client.execute(&sql) => Some(r),
                _ = tokio::signal::ctrl_c() => {
                    let _ = canceller.cancel_current().await;
                    None
                }
            };
            match outcome {
                Some(Ok(out)) => print!("{}", format_rows(&out.columns, &out.rows, format)),
                Some(Err(ClientError::Query { error_name, message, .. })) => eprintln!("Query failed ({error_name}): {message}"),
                Some(Err(e)) => eprintln!("Error: {e}"),
                None => eprintln!("Query canceled"),
            }
        }
        buffer.clear();
    }
    if let Some(p) = history_path() {
        let _ = editor.save_history(&p);
    }
    Ok(())
}
