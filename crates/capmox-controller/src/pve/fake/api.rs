//! [`ProxmoxApi`] for [`FakeProxmox`]: each call is logged, may fail
//! with a queued error, and acts on the in-memory state.

use super::*;

#[async_trait]
impl ProxmoxApi for FakeProxmox {
    fn instance(&self) -> &str {
        "fake"
    }

    fn origin(&self) -> &str {
        "https://fake:8006"
    }

    async fn version(&self) -> Result<VersionInfo, PveError> {
        self.enter("version", String::new())?;
        let v = self
            .lock()
            .version
            .clone()
            .unwrap_or_else(|| "9.1.0".into());
        serde_json::from_value(json!({"version": v, "repoid": "fake"})).map_err(|e| {
            PveError::Decode {
                ctx: ctx("GET", "/version".into()),
                message: e.to_string(),
            }
        })
    }

    async fn cluster_status(&self) -> Result<Vec<ClusterStatusEntry>, PveError> {
        self.enter("cluster_status", String::new())?;
        Ok(Vec::new())
    }

    async fn cluster_resources(
        &self,
        _kind: Option<ResourceType>,
    ) -> Result<Vec<ClusterResource>, PveError> {
        self.enter("cluster_resources", String::new())?;
        let s = self.lock();
        let list: Vec<Value> = s
            .vms
            .iter()
            .map(|(vmid, vm)| {
                json!({
                    "id": format!("qemu/{vmid}"),
                    "type": "qemu",
                    "vmid": vmid,
                    "node": vm.node,
                    "status": if vm.running { "running" } else { "stopped" },
                    "tags": vm.config.get("tags").cloned().unwrap_or(Value::Null),
                    "template": vm.config.get("template").cloned().unwrap_or(json!(0)),
                })
            })
            .collect();
        serde_json::from_value(Value::Array(list)).map_err(|e| PveError::Decode {
            ctx: ctx("GET", "/cluster/resources".into()),
            message: e.to_string(),
        })
    }

    async fn storage_content(
        &self,
        _node: &NodeName,
        storage: &StorageId,
        _content: Option<&str>,
        _vmid: Option<VmId>,
    ) -> Result<Vec<StorageVolume>, PveError> {
        self.enter("storage_content", storage.as_str().to_string())?;
        let s = self.lock();
        let list: Vec<Value> = s
            .volumes
            .get(storage.as_str())
            .into_iter()
            .flatten()
            .map(|v| json!({"volid": v, "content": "iso", "format": "iso"}))
            .collect();
        serde_json::from_value(Value::Array(list)).map_err(|e| PveError::Decode {
            ctx: ctx("GET", "/content".into()),
            message: e.to_string(),
        })
    }

    async fn upload_iso(
        &self,
        node: &NodeName,
        storage: &StorageId,
        filename: &str,
        _bytes: Vec<u8>,
    ) -> Result<Option<Upid>, PveError> {
        let volid = format!("{}:iso/{filename}", storage.as_str());
        self.enter("upload_iso", volid.clone())?;
        {
            let mut s = self.lock();
            let list = s.volumes.entry(storage.as_str().to_string()).or_default();
            if list.contains(&volid) {
                return Err(conflict(
                    ConflictKind::AlreadyExists,
                    &format!("volume '{volid}' already exists"),
                ));
            }
            list.push(volid);
        }
        Ok(Some(self.task(node, "imgcopy", "")))
    }

    async fn delete_volume(
        &self,
        node: &NodeName,
        storage: &StorageId,
        volid: &str,
    ) -> Result<Option<Upid>, PveError> {
        self.enter("delete_volume", volid.to_string())?;
        {
            let mut s = self.lock();
            let list = s.volumes.entry(storage.as_str().to_string()).or_default();
            let Some(i) = list.iter().position(|v| v == volid) else {
                return Err(PveError::NotFound {
                    ctx: ctx(
                        "DELETE",
                        format!("/storage/{}/content/{volid}", storage.as_str()),
                    ),
                    missing: Missing::Volume,
                    message: format!("volume '{volid}' does not exist"),
                });
            };
            list.remove(i);
        }
        Ok(Some(self.task(node, "imgdel", "")))
    }

    async fn vm_config(&self, node: &NodeName, vmid: VmId) -> Result<VmConfig, PveError> {
        self.enter("vm_config", vmid.to_string())?;
        self.with_vm(node, vmid, |vm| config_of(vm))
    }

    async fn update_vm_config_async(
        &self,
        node: &NodeName,
        vmid: VmId,
        update: &ConfigUpdate,
    ) -> Result<Option<Upid>, PveError> {
        self.enter("update_vm_config_async", vmid.to_string())?;
        self.with_vm(node, vmid, |vm| {
            apply(vm, update);
            Ok(())
        })?;
        Ok(Some(self.task(node, "qmconfig", &vmid.to_string())))
    }

    async fn update_vm_config_sync(
        &self,
        node: &NodeName,
        vmid: VmId,
        update: &ConfigUpdate,
    ) -> Result<(), PveError> {
        self.enter("update_vm_config_sync", vmid.to_string())?;
        self.with_vm(node, vmid, |vm| {
            apply(vm, update);
            Ok(())
        })
    }

    async fn vm_status(&self, node: &NodeName, vmid: VmId) -> Result<VmStatus, PveError> {
        self.enter("vm_status", vmid.to_string())?;
        let running = self.with_vm(node, vmid, |vm| Ok(vm.running))?;
        let ha = match self.lock().ha.get(&vmid.get()) {
            Some((state, _)) => json!({"managed": 1, "state": state}),
            None => json!({"managed": 0}),
        };
        serde_json::from_value(
            json!({"status": if running { "running" } else { "stopped" }, "ha": ha}),
        )
        .map_err(|e| PveError::Decode {
            ctx: ctx("GET", "/status/current".into()),
            message: e.to_string(),
        })
    }

    async fn resize_disk(
        &self,
        node: &NodeName,
        vmid: VmId,
        disk: DiskSlot,
        size: DiskSize,
    ) -> Result<Option<Upid>, PveError> {
        self.enter("resize_disk", format!("{vmid} {disk} {size}"))?;
        self.with_vm(node, vmid, |vm| {
            let key = disk.to_string();
            let Some(Value::String(cur)) = vm.config.get(&key).cloned() else {
                return Err(PveError::InvalidParameter {
                    ctx: ctx("PUT", "/resize".into()),
                    errors: BTreeMap::new(),
                    message: format!("disk '{key}' does not exist"),
                });
            };
            let kept: Vec<&str> = cur.split(',').filter(|p| !p.starts_with("size=")).collect();
            vm.config.insert(
                key,
                Value::String(format!("{},size={size}", kept.join(","))),
            );
            Ok(())
        })?;
        Ok(Some(self.task(node, "resize", &vmid.to_string())))
    }

    async fn delete_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        _options: DeleteOptions,
    ) -> Result<Upid, PveError> {
        self.enter("delete_vm", vmid.to_string())?;
        let running = self.with_vm(node, vmid, |vm| Ok(vm.running))?;
        if running {
            return Err(conflict(
                ConflictKind::VmRunning,
                &format!("VM {vmid} is running - destroy failed"),
            ));
        }
        self.lock().vms.remove(&vmid.get());
        Ok(self.task(node, "qmdestroy", &vmid.to_string()))
    }

    async fn clone_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        request: &CloneRequest,
    ) -> Result<Upid, PveError> {
        let newid = request.newid.get();
        self.enter("clone_vm", format!("{vmid}->{newid}"))?;
        let target = request.target.as_ref().unwrap_or(node).as_str().to_string();
        let mut s = self.lock();
        let Some(src) = s.vms.get(&vmid.get()).cloned() else {
            return Err(vm_missing(node.as_str(), vmid.get()));
        };
        if s.vms.contains_key(&newid) {
            return Err(conflict(
                ConflictKind::AlreadyExists,
                &format!("unable to create VM {newid} - VM {newid} already exists"),
            ));
        }
        let mut config = src.config.clone();
        config.remove("template");
        if let Some(n) = &request.name {
            config.insert("name".into(), Value::String(n.clone()));
        }
        if let Some(d) = &request.description {
            config.insert("description".into(), Value::String(d.clone()));
        }
        config.insert(
            "smbios1".into(),
            Value::String(format!("uuid=00000000-0000-4000-8000-{newid:012}")),
        );
        s.vms.insert(
            newid,
            FakeVm {
                node: target,
                config,
                running: false,
            },
        );
        if let Some(p) = &request.pool {
            let Some(members) = s.pools.get_mut(p.as_str()) else {
                s.vms.remove(&newid);
                return Err(PveError::NotFound {
                    ctx: ctx("POST", format!("/nodes/{node}/qemu/{vmid}/clone")),
                    missing: Missing::Pool,
                    message: format!("pool '{}' does not exist", p.as_str()),
                });
            };
            members.insert(newid);
        }
        drop(s);
        Ok(self.task(node, "qmclone", &vmid.to_string()))
    }

    async fn start_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        _options: StartOptions,
    ) -> Result<Upid, PveError> {
        self.enter("start_vm", vmid.to_string())?;
        self.with_vm(node, vmid, |vm| {
            vm.running = true;
            Ok(())
        })?;
        Ok(self.task(node, "qmstart", &vmid.to_string()))
    }

    async fn stop_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        _options: StopOptions,
    ) -> Result<Upid, PveError> {
        self.enter("stop_vm", vmid.to_string())?;
        self.with_vm(node, vmid, |vm| {
            vm.running = false;
            Ok(())
        })?;
        Ok(self.task(node, "qmstop", &vmid.to_string()))
    }

    async fn shutdown_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        _options: ShutdownOptions,
    ) -> Result<Upid, PveError> {
        self.enter("shutdown_vm", vmid.to_string())?;
        self.with_vm(node, vmid, |vm| {
            vm.running = false;
            Ok(())
        })?;
        Ok(self.task(node, "qmshutdown", &vmid.to_string()))
    }

    async fn agent_network_interfaces(
        &self,
        node: &NodeName,
        vmid: VmId,
    ) -> Result<Vec<GuestInterface>, PveError> {
        self.enter("agent_network_interfaces", vmid.to_string())?;
        self.with_vm(node, vmid, |_| Ok(Vec::new()))
    }

    async fn agent_exec(
        &self,
        node: &NodeName,
        vmid: VmId,
        _command: &[&str],
    ) -> Result<u64, PveError> {
        self.enter("agent_exec", vmid.to_string())?;
        self.with_vm(node, vmid, |_| Ok(1))
    }

    async fn agent_exec_status(
        &self,
        node: &NodeName,
        vmid: VmId,
        _pid: u64,
    ) -> Result<ExecStatus, PveError> {
        self.enter("agent_exec_status", vmid.to_string())?;
        self.with_vm(node, vmid, |_| {
            Ok(ExecStatus {
                exited: true,
                exitcode: Some(0),
                out_data: Some("success\n".into()),
                ..ExecStatus::default()
            })
        })
    }

    async fn node_tasks(
        &self,
        node: &NodeName,
        _since: Option<u64>,
        _limit: u32,
    ) -> Result<Vec<TaskListEntry>, PveError> {
        self.enter("node_tasks", node.as_str().to_string())?;
        let s = self.lock();
        let list: Vec<Value> = s
            .tasks
            .iter()
            .filter(|(u, _)| u.split(':').nth(1) == Some(node.as_str()))
            .map(|(u, exit)| json!({"upid": u, "status": exit}))
            .collect();
        serde_json::from_value(Value::Array(list)).map_err(|e| PveError::Decode {
            ctx: ctx("GET", "/tasks".into()),
            message: e.to_string(),
        })
    }

    async fn task_ended(&self, upid: &Upid, exitstatus: String) -> Result<TaskOutcome, PveError> {
        self.enter("task_ended", upid.as_str().to_string())?;
        ended(upid, exitstatus)
    }

    async fn wait_task(&self, upid: &Upid, _options: WaitOptions) -> Result<TaskOutcome, PveError> {
        self.enter("wait_task", upid.as_str().to_string())?;
        let exit = self.lock().tasks.get(upid.as_str()).cloned();
        match exit {
            Some(e) => ended(upid, e),
            None => Err(PveError::NotFound {
                ctx: ctx("GET", format!("/tasks/{}/status", upid.as_str())),
                missing: Missing::Task,
                message: "no such task".into(),
            }),
        }
    }

    async fn permissions(&self, path: Option<&str>) -> Result<Permissions, PveError> {
        self.enter("permissions", path.unwrap_or_default().to_string())?;
        Ok(self.lock().permissions.clone())
    }

    async fn ha_resources(&self) -> Result<Vec<HaResource>, PveError> {
        self.enter("ha_resources", String::new())?;
        let st = self.lock();
        Ok(st.ha.iter().map(|(v, (s, g))| ha_json(*v, s, g)).collect())
    }

    async fn ha_resource(&self, sid: HaSid) -> Result<Option<HaResource>, PveError> {
        self.enter("ha_resource", sid.to_string())?;
        let st = self.lock();
        Ok(st
            .ha
            .get(&sid.vmid().get())
            .map(|(s, g)| ha_json(sid.vmid().get(), s, g)))
    }

    async fn create_ha_resource(&self, request: &HaResourceRequest) -> Result<(), PveError> {
        self.enter("create_ha_resource", request.sid.to_string())?;
        let mut st = self.lock();
        let vmid = request.sid.vmid().get();
        if st.ha.contains_key(&vmid) {
            return Err(conflict(
                ConflictKind::AlreadyExists,
                &format!("resource ID '{}' already defined", request.sid),
            ));
        }
        st.ha.insert(
            vmid,
            (
                request.state.as_str().to_string(),
                request.group.as_ref().map(|g| g.as_str().to_string()),
            ),
        );
        Ok(())
    }

    async fn delete_ha_resource(&self, sid: HaSid, purge: Option<bool>) -> Result<(), PveError> {
        self.enter("delete_ha_resource", format!("{sid} purge={purge:?}"))?;
        match self.lock().ha.remove(&sid.vmid().get()) {
            Some(_) => Ok(()),
            None => Err(PveError::NotFound {
                ctx: ctx("DELETE", format!("/cluster/ha/resources/{sid}")),
                missing: Missing::HaResource,
                message: format!("cannot delete service '{sid}', not HA managed!"),
            }),
        }
    }

    async fn ha_rule(&self, rule: &ConfigId) -> Result<Option<HaRule>, PveError> {
        self.enter("ha_rule", rule.as_str().to_string())?;
        let st = self.lock();
        Ok(st.ha_rules.get(rule.as_str()).map(|(r, d)| {
            serde_json::from_value(json!({
                "rule": rule.as_str(), "type": "node-affinity",
                "resources": r.join(","), "digest": d,
            }))
            .expect("a rule decodes")
        }))
    }

    async fn set_ha_rule_resources(
        &self,
        rule: &ConfigId,
        _kind: &str,
        resources: &[String],
        digest: Option<&str>,
    ) -> Result<(), PveError> {
        self.enter("set_ha_rule_resources", resources.join(","))?;
        let mut st = self.lock();
        let Some((list, d)) = st.ha_rules.get_mut(rule.as_str()) else {
            return Err(PveError::NotFound {
                ctx: ctx("PUT", format!("/cluster/ha/rules/{}", rule.as_str())),
                missing: Missing::HaRule,
                message: format!("HA rule '{}' does not exist", rule.as_str()),
            });
        };
        if digest.is_some_and(|x| x != d) {
            return Err(conflict(
                ConflictKind::DigestMismatch,
                "detected modified configuration - file changed by other user? Try again.",
            ));
        }
        *list = resources.to_vec();
        d.push('x');
        Ok(())
    }

    async fn pool(&self, pool: &PoolId) -> Result<Option<PoolInfo>, PveError> {
        self.enter("pool", pool.as_str().to_string())?;
        pool_info(&self.lock(), pool).map(Some)
    }

    async fn pool_by_path(&self, pool: &PoolId) -> Result<PoolInfo, PveError> {
        self.enter("pool_by_path", pool.as_str().to_string())?;
        pool_info(&self.lock(), pool)
    }

    async fn pci_mappings(&self) -> Result<Vec<crate::pve::PciMapping>, PveError> {
        self.enter("pci_mappings", String::new())?;
        Ok(self.lock().pci_mappings.clone())
    }
}

/// A pool and its members, or Proxmox's `pool '<id>' does not exist`.
fn pool_info(st: &super::State, pool: &PoolId) -> Result<PoolInfo, PveError> {
    let Some(members) = st.pools.get(pool.as_str()) else {
        return Err(PveError::NotFound {
            ctx: ctx("GET", "/pools".into()),
            missing: Missing::Pool,
            message: format!("pool '{}' does not exist", pool.as_str()),
        });
    };
    let members: Vec<serde_json::Value> = members
        .iter()
        .map(|v| json!({"id": format!("qemu/{v}"), "type": "qemu", "vmid": v}))
        .collect();
    Ok(
        serde_json::from_value(json!({"poolid": pool.as_str(), "members": members}))
            .expect("a pool decodes"),
    )
}
