//! The interactive shell of `flotilla sql` and `flotilla local`: rustyline with a
//! history file, statements that may span lines and end with `;`. A failed query
//! prints its error and the shell goes on.

use rustyline::error::ReadlineError;
use rustyline::DefaultEditor;

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{HumanBytes, HumanCount, ProgressBar, ProgressStyle};

use crate::client::{ClientError, QueryResultsPage, StatementClient};
use crate::format::OutputFormat;
use crate::printer::RowPrinter;

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
                r = run_and_print(&client, &sql, format) => Some(r),
                _ = tokio::signal::ctrl_c() => {
                    let _ = canceller.cancel_current().await;
                    None
                }
            };
            match outcome {
                Some(Ok(())) => {}
                Some(Err(ClientError::Query(crate::client::QueryError { error_name, message, .. }))) => {
                    eprintln!("Query failed ({error_name}): {message}")
                }
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

fn progress_message(page: &QueryResultsPage) -> String {
    let st = &page.stats;
    let n = |k: &str| st.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    format!(
        "{} stages {}/{} tasks {}/{} rows {} {} {:.1}s",
        st.get("state").and_then(|v| v.as_str()).unwrap_or("QUEUED"),
        n("completedStages"),
        n("totalStages"),
        n("completedSplits"),
        n("totalSplits"),
        HumanCount(n("processedRows")),
        HumanBytes(n("processedBytes")),
        n("elapsedTimeMillis") as f64 / 1000.0
    )
}

/// Runs a statement and prints its rows to stdout as pages arrive; on a terminal, a
/// live progress line (state, stages and tasks done of total, rows, bytes, elapsed)
/// shows on stderr until it ends.
pub async fn run_and_print(client: &StatementClient, sql: &str, format: OutputFormat) -> Result<(), ClientError> {
    let client = match crate::format::Delimited::for_format(format) {
        Some(style) => &client.clone().with_rows_as_text(style),
        None => client,
    };
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}").unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    });
    let mut printer = Some(RowPrinter::new(format, std::io::BufWriter::with_capacity(1 << 16, std::io::stdout())));
    let result = client
        .execute_streaming(sql, |page| {
            if let Some(bar) = &bar {
                bar.set_message(progress_message(page));
            }
            let Some(p) = printer.as_mut() else { return Ok(()) };
            if let Some(columns) = &page.columns {
                p.set_columns(columns.iter().cloned().map(Into::into).collect());
            }
            let (rows, text) = (page.data.take(), page.rows_text.take());
            let print = || match (rows, text) {
                (Some(rows), _) => p.rows(rows),
                (None, Some(t)) => p.rows_text(&t.text, t.rows),
                (None, None) => Ok(()),
            };
            let written = match &bar {
                Some(bar) => bar.suspend(print),
                None => print(),
            };
            written.map_err(|e| ClientError::Output(e.to_string()))
        })
        .await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result?;
    match printer.take() {
        Some(p) => p.finish().map_err(|e| ClientError::Output(e.to_string())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_line_shows_state_stages_tasks_rows_bytes_elapsed() {
        let page: QueryResultsPage = serde_json::from_value(serde_json::json!({
            "id": "q",
            "stats": {"state": "RUNNING", "completedStages": 1, "totalStages": 3, "completedSplits": 4, "totalSplits": 9,
                      "processedRows": 1500, "processedBytes": 2048, "elapsedTimeMillis": 1250}
        }))
        .unwrap();
        let m = progress_message(&page);
        assert!(m.starts_with("RUNNING stages 1/3 tasks 4/9 rows 1,500"), "{m}");
        assert!(m.contains("2.00 KiB") && m.ends_with("1.2s"), "{m}");
    }
}
