//! Resource pools: `GET /pools`, `GET /pools?poolid=…`, `POST /pools`.

use serde::Deserialize;

use crate::PveClient;
use crate::client::Call;
use crate::encode::Form;
use crate::error::PveError;
use crate::types::lenient::opt_string;
use crate::types::{PoolId, VmId};

/// A member of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PoolMember {
    /// Resource id, e.g. `qemu/105`, `storage/pve-a1/ceph`.
    pub id: String,
    /// `qemu`, `lxc`, `storage`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Node.
    #[serde(default, deserialize_with = "opt_string")]
    pub node: Option<String>,
    /// VMID (guests).
    #[serde(default)]
    pub vmid: Option<VmId>,
    /// Storage id (storages).
    #[serde(default, deserialize_with = "opt_string")]
    pub storage: Option<String>,
}

/// A pool (members are only listed by the single-pool query).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PoolInfo {
    /// Pool id.
    pub poolid: String,
    /// Comment.
    #[serde(default, deserialize_with = "opt_string")]
    pub comment: Option<String>,
    /// Members.
    #[serde(default)]
    pub members: Vec<PoolMember>,
}

impl PoolInfo {
    /// Whether the guest `vmid` is a member.
    pub fn has_vm(&self, vmid: VmId) -> bool {
        self.members.iter().any(|m| m.vmid == Some(vmid))
    }
}

impl PveClient {
    /// `GET /pools`: pools the token may see (without members).
    ///
    /// # Errors
    /// Transport errors only (see [`PveClient`]).
    pub async fn pools(&self) -> Result<Vec<PoolInfo>, PveError> {
        self.call(Call::get("/pools", "/pools".to_owned())).await
    }

    /// `GET /pools?poolid=<id>` (PVE ≥ 8.1; replaces the deprecated
    /// `/pools/{poolid}`): one pool with its members. Returns `None` when the
    /// server answers with an empty list.
    ///
    /// # Errors
    /// [`PveError::NotFound`] / `InvalidParameter` when the pool does not
    /// exist; `Unsupported` on PVE < 8.1; transport errors.
    pub async fn pool(&self, poolid: &PoolId) -> Result<Option<PoolInfo>, PveError> {
        let mut q = Form::new();
        q.push("poolid", poolid.as_str());
        let list: Vec<PoolInfo> = self
            .call(Call::get("/pools", "/pools".to_owned()).with_query(q))
            .await?;
        Ok(list.into_iter().next())
    }

    /// `GET /pools/{poolid}` (PVE < 8.1; deprecated from 8.1 on, use
    /// [`PveClient::pool`]): one pool with its members.
    ///
    /// # Errors
    /// [`PveError::NotFound`] (`Missing::Pool`) when the pool does not
    /// exist; `PermissionDenied` without `Pool.Audit` on `/pool/{poolid}`;
    /// transport errors.
    pub async fn pool_by_path(&self, poolid: &PoolId) -> Result<PoolInfo, PveError> {
        #[derive(Deserialize)]
        struct One {
            #[serde(default, deserialize_with = "opt_string")]
            comment: Option<String>,
            #[serde(default)]
            members: Vec<PoolMember>,
        }
        let one: One = self
            .call(Call::get(
                "/pools/{poolid}",
                format!("/pools/{}", poolid.as_str()),
            ))
            .await?;
        Ok(PoolInfo {
            poolid: poolid.as_str().to_string(),
            comment: one.comment,
            members: one.members,
        })
    }

    /// `POST /pools`: creates a pool (needs `Pool.Allocate`).
    ///
    /// # Errors
    /// [`PveError::InvalidParameter`] / `Conflict` when it exists already;
    /// `PermissionDenied`; transport errors.
    pub async fn create_pool(
        &self,
        poolid: &PoolId,
        comment: Option<&str>,
    ) -> Result<(), PveError> {
        let mut f = Form::new();
        f.push("poolid", poolid.as_str())
            .push_opt("comment", comment);
        let _: Option<serde_json::Value> = self
            .call(Call::post("/pools", "/pools".to_owned(), f))
            .await?;
        Ok(())
    }
}
