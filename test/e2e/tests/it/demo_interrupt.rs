//! Ctrl-C stops the demo cleanly, and its exit status says it was
//! interrupted (130, as a shell reports a process ended by SIGINT), not
//! that it ran to its end.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn an_interrupted_demo_exits_130_after_stopping_everything() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--timeout-secs", "600"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run the demo binary");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("controller log:") {
                let _ = tx.send(());
            }
            seen.push(line);
        }
        seen
    });
    // The environment is up once the demo names the controller's log.
    if rx.recv_timeout(Duration::from_secs(120)).is_err() {
        let _ = child.kill();
        panic!("the demo did not come up: {:?}", reader.join());
    }
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let until = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the demo") {
            break s;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("the demo did not stop within 60 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let lines = reader.join().expect("read the demo's output");
    assert_eq!(status.code(), Some(130), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("interrupted: the simulated datacenters")),
        "{lines:?}"
    );
}
