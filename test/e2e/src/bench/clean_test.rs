//! The clean `make test` figure of issue 25's goal table: how long
//! `make test` takes from a fresh clone with an empty target directory
//! (build and every test). Measuring it takes as long as it says, so the
//! benchmark does not run it: `make time-clean-test`
//! (`scripts/time-clean-test.sh`) does, and writes a [`Record`] that a later
//! `make bench` reports with its commit and date.

use std::path::Path;

use serde::Deserialize;

use crate::error::{E2eError, Result};

/// What `scripts/time-clean-test.sh` wrote, a JSON object.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The measured commit, short hash (the clone holds only what is committed).
    pub commit: String,
    /// Wall time of `make test`, whole seconds.
    pub seconds: u64,
    /// `make test`'s exit code (0: every check and test passed).
    pub exit_code: i32,
    /// When it ended, `YYYY-MM-DD HH:MM UTC`.
    pub finished: String,
    /// Processors of the machine it ran on.
    pub cores: usize,
    /// nextest's summary line (`1181 tests run: 1181 passed, 0 skipped`),
    /// empty when the run ended before the tests.
    pub summary: String,
}

/// Reads the record at `path`: `Ok(None)` when there is none.
///
/// # Errors
/// [`E2eError::Io`] when the file exists but cannot be read, or is not a
/// record (an `InvalidData` error saying so).
pub fn read(path: &Path) -> Result<Option<Record>> {
    let io = |source| E2eError::Io {
        path: path.to_path_buf(),
        source,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not a record of scripts/time-clean-test.sh: {e}"),
        ))
    })
}

/// The goal row's value: the minutes, the commit and date measured, and
/// whether it met `target_minutes` (`None`: nothing to mark, no record).
/// `bench_commit` is the benchmark's own commit: a record of another one
/// says so.
pub fn row_value(
    record: Option<&Record>,
    bench_commit: &str,
    target_minutes: f64,
) -> (String, Option<bool>) {
    let Some(r) = record else {
        return (
            "not measured (`make time-clean-test` measures it for `make bench`)".into(),
            None,
        );
    };
    let minutes = r.seconds as f64 / 60.0;
    let other = if bench_commit.trim_end_matches("+dirty") == r.commit {
        String::new()
    } else {
        format!(", not this run's `{bench_commit}`")
    };
    let at = format!(
        "commit `{}`{other}, {} cores, {}",
        r.commit, r.cores, r.finished
    );
    if r.exit_code != 0 {
        return (
            format!(
                "failed (exit {}) after {minutes:.1} min ({at})",
                r.exit_code
            ),
            Some(false),
        );
    }
    let tests = if r.summary.is_empty() {
        String::new()
    } else {
        format!("; {}", r.summary)
    };
    (
        format!("{minutes:.1} min ({at}{tests})"),
        Some(minutes <= target_minutes),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seconds: u64, exit_code: i32) -> Record {
        Record {
            commit: "657b7e5".into(),
            seconds,
            exit_code,
            finished: "2026-12-03 18:51 UTC".into(),
            cores: 2,
            summary: "1181 tests run: 1181 passed, 0 skipped".into(),
        }
    }

    #[test]
    fn the_row_says_what_was_measured_and_where() {
        assert_eq!(
            row_value(Some(&record(412, 0)), "657b7e5", 7.0),
            (
                "6.9 min (commit `657b7e5`, 2 cores, 2026-12-03 18:51 UTC; 1181 tests run: 1181 passed, 0 skipped)".to_string(),
                Some(true)
            )
        );
        assert_eq!(
            row_value(Some(&record(450, 0)), "abc1234+dirty", 7.0),
            (
                "7.5 min (commit `657b7e5`, not this run's `abc1234+dirty`, 2 cores, 2026-12-03 18:51 UTC; 1181 tests run: 1181 passed, 0 skipped)".to_string(),
                Some(false)
            )
        );
        assert_eq!(
            row_value(Some(&record(300, 2)), "657b7e5+dirty", 7.0),
            (
                "failed (exit 2) after 5.0 min (commit `657b7e5`, 2 cores, 2026-12-03 18:51 UTC)"
                    .to_string(),
                Some(false)
            )
        );
        assert_eq!(row_value(None, "657b7e5", 7.0).1, None);
    }

    #[test]
    fn a_record_is_read_back_and_a_missing_one_is_none() {
        let dir = std::env::temp_dir().join(format!("capmox-clean-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("clean-make-test.json");
        assert_eq!(read(&path).unwrap(), None);
        std::fs::write(
            &path,
            r#"{"commit":"657b7e5","seconds":412,"exit_code":0,"finished":"2026-12-03 18:51 UTC","cores":2,"summary":"1181 tests run: 1181 passed, 0 skipped"}"#,
        )
        .unwrap();
        assert_eq!(read(&path).unwrap(), Some(record(412, 0)));
        std::fs::write(&path, "{}").unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(
            e.contains("not a record of scripts/time-clean-test.sh"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
