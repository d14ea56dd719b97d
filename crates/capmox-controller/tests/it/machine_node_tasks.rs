//! A node's task list answers for every task awaited on that node: while
//! the tasks run, one list read answers every machine whose poll is due;
//! when they end, the first poll's read answers its own task, wakes the
//! other machines and answers them without another call; a task the list
//! does not show is reported as unlisted (its status is then read directly).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use std::time::Duration;

use capmox_controller::machine::runtime::node_tasks::{Answer, NodeTasks};
use capmox_controller::pve::{CloneRequest, NodeName, Upid, VmId};
use kube::runtime::reflector::ObjectRef;
use support::*;
use tokio::time::Instant;

const LIST: &str = "/nodes/{node}/tasks";
const STATUS: &str = "/nodes/{node}/tasks/{upid}/status";

#[tokio::test]
async fn one_list_read_answers_every_task_of_a_node() {
    // Clones of 200 s simulated (1 s real): long enough to be seen running
    // by the first reads also on a loaded machine (at 4 s, 20 ms real, the
    // clones had ended before the first read when other builds shared the
    // 2 cores).
    let mut sim = fast_sim();
    for c in &mut sim.clusters {
        c.timings.clone_full = 200.0;
    }
    let w = world_with(WorldOptions {
        sim,
        ..WorldOptions::default()
    })
    .await;
    let pc = w
        .cluster_mapped(
            "wl1",
            multi(vec![instance("east", 10)]),
            &[("east", "dc-a")],
        )
        .await;
    let inst = w
        .shared
        .clients
        .get(&w.shared.kube, &pc, "east")
        .await
        .unwrap();
    let node = NodeName::new("pve-a1".to_string()).unwrap();
    let mut upids: Vec<Upid> = Vec::new();
    for id in [601u32, 602, 603] {
        let req = CloneRequest {
            full: Some(true),
            ..CloneRequest::new(VmId::new(id).unwrap())
        };
        upids.push(
            inst.api
                .clone_vm(&node, VmId::new(9000).unwrap(), &req)
                .await
                .unwrap(),
        );
    }
    let machine = |i: usize| ObjectRef::new(&format!("m{i}")).within("default");
    let (board, mut wakes) = NodeTasks::new();
    let api = inst.api.as_ref();
    let id = &inst.identity;
    w.pve("dc-a").reset_calls();

    // All three polls due now, tasks running: one list read answers all.
    let due = Instant::now();
    for (i, u) in upids.iter().enumerate() {
        let a = board.status(api, id, u, due, machine(i)).await.unwrap();
        assert_eq!(a, Answer::Running, "task {i}");
    }
    let calls = w.pve("dc-a").calls();
    assert_eq!(calls.count("GET", LIST), 1);
    assert_eq!(calls.count("GET", STATUS), 0);

    // Wait for the three clones to end (pve-sim's own task table).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let ended = w
            .pve("dc-a")
            .tasks()
            .into_iter()
            .filter(|t| upids.iter().any(|u| u.as_str() == t.upid) && t.exitstatus.is_some())
            .count();
        if ended == 3 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "clones never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The first machine's poll reads the list again: its own task ended,
    // and the two other machines are woken.
    let a = board
        .status(api, id, &upids[0], Instant::now(), machine(0))
        .await
        .unwrap();
    assert_eq!(a, Answer::Ended("OK".to_string()));
    let mut woken = vec![
        wakes.try_recv().unwrap().name,
        wakes.try_recv().unwrap().name,
    ];
    woken.sort();
    assert_eq!(woken, vec!["m1".to_string(), "m2".to_string()]);
    assert!(wakes.try_recv().is_err(), "each machine is woken once");

    // The woken machines learn their end without a call.
    assert_eq!(board.ended(id, &upids[1]), Some("OK".to_string()));
    for i in [1usize, 2] {
        let a = board
            .status(api, id, &upids[i], Instant::now(), machine(i))
            .await
            .unwrap();
        assert_eq!(a, Answer::Ended("OK".to_string()), "task {i}");
    }
    let calls = w.pve("dc-a").calls();
    assert_eq!(calls.count("GET", LIST), 2);
    assert_eq!(calls.count("GET", STATUS), 0);

    // A task the node never ran is not in its list.
    let stranger =
        Upid::parse("UPID:pve-a1:00000001:00000001:00000001:qmstart:999:capmox@pve!capi:").unwrap();
    let a = board
        .status(api, id, &stranger, Instant::now(), machine(9))
        .await
        .unwrap();
    assert_eq!(a, Answer::Unlisted);
}
