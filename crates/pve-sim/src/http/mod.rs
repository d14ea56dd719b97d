//! The request pipeline of one simulated cluster, in pveproxy's order:
//! control API (`/_sim/`) → fault injection → authentication (401, delayed) →
//! routing (501) → parameters → permission check (403) → node reachability
//! (500 unknown node, 595 offline) and quorum → schema validation (400) →
//! handler. Error responses close the connection.

pub(crate) mod envelope;
pub(crate) mod params;
pub(crate) mod routes;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{Request, Response, header};
use hyper::body::Incoming;
use serde_json::Value;

use crate::auth::Principal;
use crate::clock::epoch_now;
use crate::faults::FaultKind;
use crate::state::Cluster;
use envelope::{ApiError, ApiResult, error_response, ok_response};
use params::{Params, parse_urlencoded};
use routes::{Check, Route, RouteId, RouteMatch};

/// Request body limit for everything but uploads (pve-http-server: 512 KiB).
const MAX_BODY: usize = 512 * 1024;
/// Upload limit kept in memory.
const MAX_UPLOAD: u64 = 4 << 30;

/// An uploaded file (multipart part with a file name).
#[derive(Clone, Debug)]
pub(crate) struct UploadFile {
    pub filename: String,
    pub bytes: Vec<u8>,
}

/// Everything a handler sees.
pub(crate) struct Ctx {
    pub cluster: Arc<Cluster>,
    pub who: Principal,
    pub params: Params,
    pub route: &'static Route,
    /// A fault that affects the task this call starts.
    pub task_fault: Option<FaultKind>,
    pub upload: Option<UploadFile>,
}

impl Ctx {
    /// The `{node}` path parameter.
    pub fn node(&self) -> String {
        self.params.str("node").unwrap_or_default()
    }

    /// The `{vmid}` path parameter.
    pub fn vmid(&self) -> Result<u32, ApiError> {
        self.params
            .u32("vmid")?
            .ok_or_else(|| ApiError::param("vmid", "property is missing and it is not optional"))
    }

    /// Permission check (`rpcenv->check`).
    pub fn check(&self, path: &str, privs: &[&str], any: bool) -> Result<(), ApiError> {
        let st = self.cluster.lock();
        st.auth.check(&self.who, path, privs, any)
    }

    /// Whether the caller has the privileges (no error).
    pub fn has(&self, path: &str, privs: &[&str], any: bool) -> bool {
        let st = self.cluster.lock();
        st.auth.has(&self.who, path, privs, any)
    }
}

/// The error the service returns to make hyper drop the connection.
#[derive(Debug)]
pub(crate) struct ConnReset;

impl std::fmt::Display for ConnReset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection reset by fault injection")
    }
}

impl std::error::Error for ConnReset {}

/// The tower service of one cluster.
#[derive(Clone)]
pub(crate) struct ApiService {
    pub cluster: Arc<Cluster>,
}

type BoxFut = Pin<Box<dyn Future<Output = Result<Response<Body>, ConnReset>> + Send>>;

impl tower_service::Service<Request<Incoming>> for ApiService {
    type Response = Response<Body>;
    type Error = ConnReset;
    type Future = BoxFut;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        let cluster = self.cluster.clone();
        let (parts, body) = req.into_parts();
        Box::pin(handle(cluster, Request::from_parts(parts, Body::new(body))))
    }
}

/// Makes an [`ApiService`] per connection.
#[derive(Clone)]
pub(crate) struct MakeApi(pub ApiService);

impl<T> tower_service::Service<T> for MakeApi {
    type Response = ApiService;
    type Error = Infallible;
    type Future = std::future::Ready<Result<ApiService, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _target: T) -> Self::Future {
        std::future::ready(Ok(self.0.clone()))
    }
}

fn count(cluster: &Cluster, method: &str, template: &str, status: u16) {
    let mut c = cluster.calls.lock().unwrap_or_else(|p| p.into_inner());
    c.total += 1;
    if status >= 400 {
        c.errors += 1;
    }
    *c.by_endpoint
        .entry(format!("{method} {template}"))
        .or_insert(0) += 1;
}

/// Handles one request (also used by tests through the service).
pub(crate) async fn handle(
    cluster: Arc<Cluster>,
    req: Request<Body>,
) -> Result<Response<Body>, ConnReset> {
    let path = req.uri().path().to_string();
    if path == "/_sim" || path.starts_with("/_sim/") {
        return Ok(crate::control::handle(&cluster, req).await);
    }
    let Some(rel) = path
        .strip_prefix("/api2/json")
        .map(|r| if r.is_empty() { "/" } else { r })
    else {
        let e = ApiError::Http {
            status: 501,
            message: format!("no such file '{path}'"),
            json_body: false,
        };
        return Ok(error_response(&e));
    };
    let rel = rel.to_string();
    let method = req.method().as_str().to_string();
    let found = routes::find(&method, &rel);
    let template = match &found {
        RouteMatch::Found(r, _) => r.template,
        _ => "<unmatched>",
    };
    let node_param = match &found {
        RouteMatch::Found(_, p) => p.iter().find(|(k, _)| k == "node").map(|(_, v)| v.clone()),
        _ => None,
    };
    let result = pipeline(&cluster, req, &method, &rel, found, node_param).await;
    let status = match &result {
        Ok(r) => r.status().as_u16(),
        Err(_) => 599,
    };
    count(&cluster, &method, template, status);
    result
}

async fn pipeline(
    cluster: &Arc<Cluster>,
    req: Request<Body>,
    method: &str,
    rel: &str,
    found: RouteMatch,
    node_param: Option<String>,
) -> Result<Response<Body>, ConnReset> {
    let template = match &found {
        RouteMatch::Found(r, _) => r.template,
        _ => rel,
    };
    // fault injection
    let hits = {
        let mut faults = cluster.faults.lock().unwrap_or_else(|p| p.into_inner());
        let mut st = cluster.lock();
        faults.evaluate(method, template, rel, node_param.as_deref(), || st.draw())
    };
    if hits.latency > 0.0 {
        cluster.clock.sleep(hits.latency).await;
    }
    let mut task_fault = None;
    match hits.effect {
        Some(FaultKind::ConnectionReset) => return Err(ConnReset),
        Some(FaultKind::Error { status, message }) => {
            return Ok(error_response(&ApiError::status(status, message)));
        }
        Some(FaultKind::NodeUnreachable) => return Ok(error_response(&unreachable_error())),
        Some(FaultKind::NoQuorum) if method != "GET" => {
            return Ok(error_response(&ApiError::internal(
                "cluster not ready - no quorum?",
            )));
        }
        Some(
            other @ (FaultKind::LockTimeout
            | FaultKind::TaskFailure { .. }
            | FaultKind::TaskWarnings { .. }),
        ) => {
            task_fault = Some(other);
        }
        _ => {}
    }

    // authentication
    let world = matches!(&found, RouteMatch::Found(r, _) if matches!(r.check, Check::World));
    let is_upload = matches!(&found, RouteMatch::Found(r, _) if r.id == RouteId::StorageUpload);
    let who = if world {
        Principal {
            userid: String::new(),
            token: None,
        }
    } else {
        let res = {
            let st = cluster.lock();
            st.auth
                .authenticate(req.headers(), method != "GET" && !is_upload, epoch_now())
        };
        match res {
            Ok(p) => p,
            Err(e) => {
                cluster
                    .clock
                    .sleep(cluster.cfg.timings.auth_failure_delay)
                    .await;
                return Ok(error_response(&e));
            }
        }
    };

    let major = crate::ha_manager::major(cluster);
    let (route, path_params) = match found {
        RouteMatch::Found(r, p) if r.served_on(major) => (r, p),
        RouteMatch::Found(..) | RouteMatch::WrongMethod | RouteMatch::NotFound => {
            return Ok(error_response(&ApiError::status(
                501,
                format!("Method '{method} {rel}' not implemented"),
            )));
        }
    };

    // parameters
    let (params, upload, conflicts) = match read_params(req, method, &path_params, is_upload).await
    {
        Ok(x) => x,
        Err(e) => return Ok(error_response(&e)),
    };

    // permissions
    {
        let st = cluster.lock();
        if let Err(e) = eval_check(route.check_on(major), &st.auth, &who, &params, true) {
            return Ok(error_response(&e));
        }
    }

    // node reachability and quorum
    if let Some(node) = &node_param {
        let st = cluster.lock();
        match st.nodes.get(node) {
            None => {
                return Ok(error_response(&ApiError::internal(format!(
                    "hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"
                ))));
            }
            Some(n) if !n.online => return Ok(error_response(&unreachable_error())),
            Some(_) => {}
        }
    }
    if method != "GET" && !world && !cluster.lock().quorate() {
        return Ok(error_response(&ApiError::internal(
            "cluster not ready - no quorum?",
        )));
    }

    // schema validation
    if !conflicts.is_empty() {
        return Ok(error_response(&ApiError::Param(conflicts)));
    }
    if let Some(schema) = &cluster.schema
        && let Err(errors) = schema.validate(method, route.template, &params.map)
    {
        return Ok(error_response(&ApiError::Param(errors)));
    }

    let ctx = Ctx {
        cluster: cluster.clone(),
        who,
        params,
        route,
        task_fault,
        upload,
    };
    Ok(match dispatch(&ctx).await {
        Ok(reply) => ok_response(reply),
        Err(e) => error_response(&e),
    })
}

/// pveproxy's answer when the node a call is proxied to is unreachable.
pub(crate) fn unreachable_error() -> ApiError {
    ApiError::status(
        595,
        "Errors during connection establishment, proxy handshake: No route to host",
    )
}

type ParamResult = Result<(Params, Option<UploadFile>, BTreeMap<String, String>), ApiError>;

async fn read_params(
    req: Request<Body>,
    method: &str,
    path_params: &[(String, String)],
    is_upload: bool,
) -> ParamResult {
    let (parts, body) = req.into_parts();
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut map: BTreeMap<String, Value> = BTreeMap::new();
    let mut upload = None;
    if is_upload && content_type.starts_with("multipart/form-data") {
        let boundary = multer::parse_boundary(&content_type).map_err(|e| {
            ApiError::status(
                501,
                format!("upload 'Content-Type '{content_type}' not implemented ({e})"),
            )
        })?;
        let constraints = multer::Constraints::new()
            .size_limit(multer::SizeLimit::new().whole_stream(MAX_UPLOAD));
        let mut mp =
            multer::Multipart::with_constraints(body.into_data_stream(), boundary, constraints);
        loop {
            let field = mp
                .next_field()
                .await
                .map_err(|e| ApiError::status(400, format!("upload failed: {e}")))?;
            let Some(field) = field else { break };
            let name = field.name().unwrap_or("").to_string();
            let file_name = field.file_name().map(String::from);
            let bytes = field
                .bytes()
                .await
                .map_err(|e| ApiError::status(400, format!("upload failed: {e}")))?;
            match file_name {
                Some(f) => {
                    map.insert("filename".into(), Value::String(f.clone()));
                    upload = Some(UploadFile {
                        filename: f,
                        bytes: bytes.to_vec(),
                    });
                }
                None => {
                    map.insert(
                        name,
                        Value::String(String::from_utf8_lossy(&bytes).into_owned()),
                    );
                }
            }
        }
    } else {
        let bytes = axum::body::to_bytes(body, MAX_BODY)
            .await
            .map_err(|_| ApiError::status(501, "for data too large"))?;
        if !bytes.is_empty() {
            if method == "GET" || method == "DELETE" {
                return Err(ApiError::Http {
                    status: 501,
                    message: format!("Unexpected content for method '{method}'"),
                    json_body: false,
                });
            }
            if content_type.starts_with("application/json") {
                let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
                    ApiError::status(400, format!("unable to parse JSON body - {e}"))
                })?;
                match v {
                    Value::Object(o) => map.extend(o),
                    Value::Null => {}
                    _ => return Err(ApiError::status(400, "JSON body is not an object")),
                }
            } else if content_type.starts_with("multipart/form-data") {
                return Err(ApiError::status(
                    501,
                    format!("upload 'Content-Type '{content_type}' not implemented"),
                ));
            } else {
                parse_urlencoded(&String::from_utf8_lossy(&bytes), &mut map);
            }
        }
    }
    if let Some(q) = parts.uri.query() {
        let mut query = BTreeMap::new();
        parse_urlencoded(q, &mut query);
        map.extend(query);
    }
    map.remove("_dc");
    let mut conflicts = BTreeMap::new();
    for (k, v) in path_params {
        if let Some(existing) = map.get(k)
            && params::value_as_string(existing).as_deref() != Some(v.as_str())
        {
            conflicts.insert(
                k.clone(),
                "parameter conflicts with the value in the URL path".to_string(),
            );
        }
        map.insert(k.clone(), Value::String(v.clone()));
    }
    Ok((Params { map }, upload, conflicts))
}

/// Evaluates a permission check expression; with `raise` the failing leaf's
/// 403 text is returned.
pub(crate) fn eval_check(
    check: Check,
    auth: &crate::auth::AuthState,
    who: &Principal,
    params: &Params,
    raise: bool,
) -> Result<(), ApiError> {
    match check {
        Check::All | Check::World => Ok(()),
        Check::Perm {
            path,
            privs,
            any,
            require_param,
        } => {
            if let Some(p) = require_param
                && !params.has(p)
            {
                return Err(ApiError::forbidden(""));
            }
            let mut concrete = path.to_string();
            for (k, v) in &params.map {
                let needle = format!("{{{k}}}");
                if concrete.contains(&needle) {
                    concrete = concrete.replace(&needle, &params::display(v));
                }
            }
            // unknown placeholders become empty, as Perl interpolates undef
            while let Some(start) = concrete.find('{') {
                let end = concrete[start..]
                    .find('}')
                    .map(|e| start + e + 1)
                    .unwrap_or(concrete.len());
                concrete.replace_range(start..end, "");
            }
            if auth.has(who, &concrete, privs, any) {
                Ok(())
            } else if raise {
                Err(ApiError::forbidden(&format!(
                    "{concrete}, {}",
                    privs.join("|")
                )))
            } else {
                Err(ApiError::forbidden(""))
            }
        }
        Check::And(items) => {
            for c in items {
                eval_check(*c, auth, who, params, raise)?;
            }
            Ok(())
        }
        Check::Or(items) => {
            if items
                .iter()
                .any(|c| eval_check(*c, auth, who, params, false).is_ok())
            {
                Ok(())
            } else {
                Err(ApiError::forbidden(""))
            }
        }
    }
}

async fn dispatch(ctx: &Ctx) -> ApiResult {
    use crate::api::{access, agent, cluster, ha, nodes, pools, qemu, storage, tasks};
    match ctx.route.id {
        RouteId::Version => cluster::version(ctx),
        RouteId::AccessTicket => access::ticket(ctx).await,
        RouteId::AccessPermissions => access::permissions(ctx),
        RouteId::ClusterResources => cluster::resources(ctx),
        RouteId::ClusterNextid => cluster::nextid(ctx),
        RouteId::ClusterStatus => cluster::status(ctx),
        RouteId::PciMappings => cluster::pci_mappings(ctx),
        RouteId::ClusterOptions => cluster::options(ctx),
        RouteId::ClusterTasks => tasks::cluster_tasks(ctx),
        RouteId::HaList => ha::list(ctx),
        RouteId::HaCreate => ha::create(ctx),
        RouteId::HaGet => ha::get(ctx),
        RouteId::HaUpdate => ha::update(ctx),
        RouteId::HaDelete => ha::delete(ctx),
        RouteId::HaMigrate => ha::migrate(ctx, false),
        RouteId::HaRelocate => ha::migrate(ctx, true),
        RouteId::HaGroups => ha::groups(ctx),
        RouteId::HaGroup => ha::group(ctx),
        RouteId::HaRules => ha::rules(ctx),
        RouteId::HaRule => ha::rule(ctx),
        RouteId::HaRuleUpdate => ha::update_rule(ctx),
        RouteId::PoolsList => pools::list(ctx),
        RouteId::PoolsCreate => pools::create(ctx),
        RouteId::PoolsUpdate | RouteId::PoolUpdate => pools::update(ctx),
        RouteId::PoolsDelete | RouteId::PoolDelete => pools::delete(ctx),
        RouteId::PoolGet => pools::get(ctx),
        RouteId::NodesList => nodes::list(ctx),
        RouteId::NodeStatus => nodes::status(ctx),
        RouteId::NodeCertificates => nodes::certificates(ctx),
        RouteId::NodeNetwork => nodes::network(ctx),
        RouteId::NodeTasks => tasks::node_tasks(ctx),
        RouteId::TaskStatus => tasks::status(ctx),
        RouteId::TaskLog => tasks::log(ctx),
        RouteId::TaskStop => tasks::stop(ctx),
        RouteId::StorageList => storage::list(ctx),
        RouteId::StorageStatus => storage::status(ctx),
        RouteId::StorageContent => storage::content(ctx),
        RouteId::StorageAlloc => storage::alloc(ctx),
        RouteId::VolumeGet => storage::volume_get(ctx),
        RouteId::VolumeDelete => storage::volume_delete(ctx).await,
        RouteId::StorageUpload => storage::upload(ctx),
        RouteId::QemuList => qemu::list(ctx),
        RouteId::QemuCreate => qemu::create(ctx),
        RouteId::QemuDestroy => qemu::destroy(ctx),
        RouteId::QemuClone => crate::api::clone::clone(ctx),
        RouteId::QemuMigrate => crate::api::migrate::migrate(ctx),
        RouteId::ConfigGet => crate::api::config::get(ctx),
        RouteId::ConfigPost => crate::api::config::update(ctx, false).await,
        RouteId::ConfigPut => crate::api::config::update(ctx, true).await,
        RouteId::Pending => crate::api::config::pending(ctx),
        RouteId::Resize => qemu::resize(ctx).await,
        RouteId::Feature => qemu::feature(ctx),
        RouteId::StatusCurrent => crate::api::power::current(ctx),
        RouteId::Start => crate::api::power::start(ctx),
        RouteId::Stop => crate::api::power::stop(ctx, false),
        RouteId::Shutdown => crate::api::power::stop(ctx, true),
        RouteId::Reboot => crate::api::power::reboot(ctx, true),
        RouteId::Reset => crate::api::power::reboot(ctx, false),
        RouteId::Suspend => crate::api::power::suspend(ctx, true),
        RouteId::Resume => crate::api::power::suspend(ctx, false),
        RouteId::AgentNetwork => agent::network(ctx),
        RouteId::AgentPing => agent::ping(ctx),
        RouteId::AgentOsinfo => agent::osinfo(ctx),
        RouteId::AgentExec => agent::exec(ctx),
        RouteId::AgentExecStatus => agent::exec_status(ctx),
        RouteId::Template => qemu::template(ctx),
        RouteId::CloudinitGet => crate::api::cloudinit::get(ctx),
        RouteId::CloudinitPut => crate::api::cloudinit::regenerate(ctx).await,
        RouteId::CloudinitDump => crate::api::cloudinit::dump(ctx),
    }
}
