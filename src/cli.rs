//! The command line, as clap derive types only. `app` converts these once into plain
//! settings; nothing below `app` sees a clap type.

use std::ffi::OsString;
use std::path::PathBuf;

use edpm_core::runner::policy::Choice;
pub use edpm_core::runner::policy::{Executor, InventorySource};

/// A parser for one of the core's named settings, offering its names as clap's value_enum
/// would (the core has no clap).
fn choice<T: Choice + Send + Sync>() -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(T::names()).map(|v| T::from_name(&v).unwrap_or(T::NAMES[0].1))
}
use clap::{Args, Parser, Subcommand, ValueEnum};

/// `-o`/`--output`, as kubectl means it: the output format, the same flag as `--format`. Where
/// a command writes a file (`inventory export`, `oslo merge`), a value that names none of its
/// formats is that file: `-o FILE` and `--output FILE` were those commands' spelling of
/// `--output-file FILE`, kept for the scripts that use it (docs/reference.md, "-o").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output<F> {
    Format(F),
    File(PathBuf),
}

/// The parser of an [`Output`] flag: a format's name, else a file.
fn format_or_file<F: ValueEnum + Clone + Send + Sync + 'static>()
-> impl clap::builder::TypedValueParser<Value = Output<F>> {
    |s: &str| -> Result<Output<F>, std::convert::Infallible> {
        Ok(F::from_str(s, false).map_or_else(|_| Output::File(s.into()), Output::Format))
    }
}

/// Ansible inventories, oslo.config rendering and file staging for OpenStack EDPM nodes.
///
/// Reads the data-plane custom resources (OpenStackDataPlaneRole/Node, OpenStackDataPlaneNodeSet)
/// from a directory of manifests or from the Kubernetes API.
#[derive(Debug, Parser)]
#[command(name = "edpm-agent", version, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    /// Log to stderr (-v info, -vv debug). Never use with Ansible: it reads stderr as errors.
    #[arg(long, short = 'v', action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Where to read the data plane: also accepted after the command.
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Where to read the data plane and how to reach the cluster. Every command that reads the data
/// plane takes these, before or after its name; `oslo` commands read only the files they name.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Source options")]
pub struct SourceArgs {
    /// Where to read objects: a directory (or file) of YAML/JSON manifests, or `kube` for the
    /// Kubernetes API. Repeat to combine sources. [env: EDPM_AGENT_SOURCE, `:`-separated]
    #[arg(long = "source", value_name = "DIR|kube")]
    pub sources: Vec<String>,
    /// Namespace to read (kube), or to keep (directory). [env: EDPM_AGENT_NAMESPACE]
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Label selector for the data-plane kinds (DataPlanes, Roles, Nodes, NodeSets), applied
    /// to every source as the API server applies it. [env: EDPM_AGENT_SELECTOR]
    #[arg(long, short = 'l')]
    pub selector: Option<String>,
    /// Accept an inventory with no hosts (by default an error, exit 13: an inventory script that
    /// finds nothing would let Ansible run against nothing and report success).
    /// [env: EDPM_AGENT_ALLOW_EMPTY]
    #[arg(long)]
    pub allow_empty: bool,
    /// Kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster). [env: EDPM_AGENT_KUBECONFIG]
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context. [env: EDPM_AGENT_CONTEXT]
    #[arg(long)]
    pub context: Option<String>,
    /// Directory where the runner mounts SSH keys. [env: EDPM_AGENT_SSH_KEY_DIR] [default: /runner/env/ssh_key]
    #[arg(long, value_name = "DIR")]
    pub ssh_key_dir: Option<String>,
    /// Settings file (YAML: source, namespace, selector, kubeconfig, context, ssh_key_dir,
    /// kube_timeout_seconds, allow_empty, images, service_phases). [env: EDPM_AGENT_CONFIG]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl SourceArgs {
    /// `self` (given before the command) with `after` (given after it) on top: sources add up,
    /// a value given after the command wins.
    pub fn merged(mut self, after: &SourceArgs) -> SourceArgs {
        self.sources.extend(after.sources.iter().cloned());
        macro_rules! over {
            ($($f:ident),*) => {$( if after.$f.is_some() { self.$f = after.$f.clone(); } )*};
        }
        over!(namespace, selector, kubeconfig, context, ssh_key_dir, config);
        self.allow_empty |= after.allow_empty;
        self
    }

    fn is_empty(&self) -> bool {
        self.sources.is_empty()
            && self.namespace.is_none()
            && self.selector.is_none()
            && self.kubeconfig.is_none()
            && self.context.is_none()
            && self.ssh_key_dir.is_none()
            && self.config.is_none()
            && !self.allow_empty
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Ansible inventory: `--list`/`--host` (dynamic inventory script), `export`, `explain`.
    Inventory(InventoryArgs),
    /// Check the data-plane objects offline and report problems by object and field.
    Validate(ValidateArgs),
    /// oslo.config files: parse, effective values across layers, lint, merge.
    Oslo(OsloArgs),
    /// Render the oslo.config files of EDPM services (nova, neutron agents) for nodes.
    Render(RenderArgs),
    /// Objects derived from the data plane, e.g. the NovaExternalCompute CRs of seed 003.
    Derive(DeriveArgs),
    /// extraMounts: which volumes and mounts reach a service; what staging would change.
    Mounts(MountsArgs),
    /// Write a node's files under a root (`/` on the node): Ceph client files and service config.
    /// Prints a JSON report {changed, unchanged, removed}.
    Stage(StageArgs),
    /// Phase -1/0/1 readiness of every node and NodeSet: show, explain, plan, wait, report.
    Status(StatusArgs),
    /// The node agent: check this EDPM node and report its readiness (systemd service); --once
    /// runs one check and prints it. Runs the node agent's own binary, edpm-agent-node, beside
    /// this one: `edpm-agent node --help` is its help.
    Node(NodeArgs),
    /// The AnsibleEE job entrypoint: prepare the runner directory, run the play
    /// (ansible-runner, else ansible-playbook), and report per-host results.
    Run(RunArgs),
}

impl Command {
    /// The source options given after the command, for the commands that read the data plane.
    pub fn source_args(&self) -> Option<&SourceArgs> {
        Some(match self {
            Command::Inventory(a) => match &a.action {
                None => &a.source,
                Some(InventoryAction::Export { source, .. })
                | Some(InventoryAction::Explain { source, .. }) => source,
            },
            Command::Validate(a) => &a.source,
            Command::Oslo(_) | Command::Node(_) => return None,
            Command::Render(a) => &a.source,
            Command::Derive(a) => match &a.what {
                DeriveWhat::Novaexternalcompute { source, .. } => source,
            },
            Command::Mounts(a) => match &a.action {
                MountsAction::Propagate { source, .. } | MountsAction::Plan { source, .. } => source,
            },
            Command::Stage(a) => &a.source,
            Command::Status(a) => match &a.action {
                StatusAction::Show { source, .. }
                | StatusAction::Explain { source, .. }
                | StatusAction::Report { source, .. }
                | StatusAction::Identities { source, .. }
                | StatusAction::Controller { source, .. }
                | StatusAction::Wait { source, .. }
                | StatusAction::Plan { source, .. } => source,
                StatusAction::Crds { .. } => return None,
            },
            Command::Run(a) => &a.source,
        })
    }
}

/// `edpm-agent run`: as the runner image's ENTRYPOINT (`edpm-agent run --`), the Job's
/// arguments follow `--` unchanged: `ansible-runner run /runner -p PLAYBOOK -i IDENT` (or
/// `-r ROLE`). The Job's environment (RUNNER_PLAYBOOK, RUNNER_CMDLINE, RUNNER_EXTRA_VARS,
/// RUNNER_INVENTORY, RUNNER_JOB_TIMEOUT, RUNNER_IDLE_TIMEOUT) is read as upstream's entrypoint
/// reads it. Exits with the play's return code; before the play, with the codes in docs/reference.md.
#[derive(Debug, Args)]
#[command(after_help = "Paths: the termination message goes to EDPM_AEE_TERMINATION_LOG, else \
    /dev/termination-log when Kubernetes mounted it, else ARTIFACTS/IDENT/termination-log; the \
    full summary to ARTIFACTS/IDENT/edpm-summary.json, where ARTIFACTS is the command's \
    --artifact-dir, else EDPM_AEE_ARTIFACTS_ROOT, else DIR/artifacts.")]
pub struct RunArgs {
    /// The runner directory to prepare and run in; replaces `/runner` in the command. Without
    /// a command, runs DIR's project/playbook.yaml (or RUNNER_ROLE) as ident edpm-agent.
    /// [env: EDPM_AGENT_RUNNER_DIR] [default: the command's directory, /runner]
    #[arg(long, value_name = "DIR")]
    pub runner_dir: Option<PathBuf>,
    /// Where the play's inventory comes from: `mounted` (DIR/inventory, as the operator mounts
    /// it), `kube` (edpm-agent's own inventory, read from the API), `sources` (edpm-agent's own,
    /// from --source or EDPM_AGENT_SOURCE). [env: EDPM_AGENT_INVENTORY_SOURCE] [default: mounted]
    #[arg(long, value_parser = choice::<InventorySource>())]
    pub inventory_source: Option<InventorySource>,
    /// Run only on the hosts that failed, were unreachable or were interrupted in the previous
    /// attempt of this ident (its summary in the artifacts directory).
    /// [env: EDPM_AGENT_RETRY_FAILED=true]
    #[arg(long)]
    pub retry_failed: bool,
    /// What runs the play: ansible-runner when it is on PATH, else ansible-playbook (`auto`).
    /// [env: EDPM_AGENT_EXECUTOR] [default: auto]
    #[arg(long, value_parser = choice::<Executor>())]
    pub executor: Option<Executor>,
    /// Start the play through this init (e.g. dumb-init): `INIT -- COMMAND`. [env: EDPM_AGENT_INIT]
    #[arg(long, value_name = "PROGRAM")]
    pub init: Option<String>,
    /// Seconds between forwarding SIGTERM/SIGINT (or a timeout's SIGTERM) and SIGKILL.
    /// [env: EDPM_AGENT_GRACE_PERIOD] [default: 20]
    #[arg(long, value_name = "SECONDS")]
    pub grace_period: Option<u64>,
    /// Only summarize the artifacts of the command's ident (or the newest run), as upstream's
    /// summary helper does; run nothing.
    #[arg(long)]
    pub summarize_only: bool,
    /// The Job's command: `ansible-runner run DIR -p PLAYBOOK -i IDENT` (or `-r ROLE`).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// For --inventory-source kube or sources.
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `edpm-agent node`: the node agent's own command line, handed to `edpm-agent-node` whole.
#[derive(Debug, Args)]
#[command(disable_help_flag = true, disable_version_flag = true)]
pub struct NodeArgs {
    /// The node agent's options: --config FILE, --once, --format text|json, --root DIR, -v
    /// (`edpm-agent node --help`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "OPTIONS")]
    pub args: Vec<OsString>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(subcommand)]
    pub action: StatusAction,
    /// With --source kube: do not ask Nova's API whether each compute's nova-compute is up
    /// and its hypervisor known (NovaComputeReady is then left out). A saved answer in a
    /// directory source is read either way.
    #[arg(long, global = true)]
    pub no_nova: bool,
    /// With --source kube: ask Nova with the credentials in this Secret (got by name; keys
    /// OS_AUTH_URL, OS_USERNAME, OS_PASSWORD, OS_PROJECT_NAME, optional OS_USER_DOMAIN_NAME,
    /// OS_PROJECT_DOMAIN_NAME, OS_REGION_NAME, OS_APPLICATION_CREDENTIAL_ID/_SECRET, and
    /// OS_CACERT holding the PEM bundle) instead of each cell's service user.
    #[arg(long, global = true, value_name = "SECRET")]
    pub nova_credentials: Option<String>,
    /// How long one request to Keystone or Nova may take: seconds, or with a unit.
    #[arg(long, global = true, value_name = "DURATION", default_value = "10")]
    pub nova_timeout: String,
    /// With --source kube: the namespace of the node agents' Leases (read, and created by
    /// report and controller), as `lease_namespace` in the agents' node.yaml.
    #[arg(long, global = true, value_name = "NAMESPACE", default_value = "edpm-node-lease")]
    pub lease_namespace: String,
}

#[derive(Debug, Subcommand)]
pub enum StatusAction {
    /// Nodes × phases at a glance (table), or every condition (json).
    Show {
        /// Only this node (name, inventory hostname or host name); repeat.
        #[arg(long = "node")]
        nodes: Vec<String>,
        /// Only this NodeSet or Role and its nodes; repeat.
        #[arg(long = "nodeset")]
        nodesets: Vec<String>,
        /// table: each not-ready node's first cause on its row, cut to the terminal's width
        /// (COLUMNS, else the terminal's, else 80) and coloured on a terminal, whole lines when
        /// piped; wide: every column (Nova, node agent, since when) and whole messages; json:
        /// every condition. `-o`/`--output` is the same flag, as kubectl spells it.
        #[arg(long, short = 'o', visible_alias = "output", value_enum, default_value_t = ShowFormat::Table)]
        format: ShowFormat,
        /// Also read the status objects `status report` wrote here (for stable transition times).
        #[arg(long, value_name = "DIR")]
        status_dir: Option<PathBuf>,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Why a node is, or is not, ready in each phase: the evidence behind each condition.
    Explain {
        /// The node (name, inventory hostname or host name), or a NodeSet or Role.
        node: String,
        /// text: each condition, why, and the evidence; json: every condition, as `status show
        /// -o json` gives it for this node or NodeSet. `-o`/`--output` is the same flag.
        #[arg(long, short = 'o', visible_alias = "output", value_enum, default_value_t = TextOrJson::Text)]
        format: TextOrJson,
        /// Also read the status objects `status report` wrote here.
        #[arg(long, value_name = "DIR")]
        status_dir: Option<PathBuf>,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// The OpenStackDataPlaneDeployments that would bring each NodeSet's failed, behind or stale
    /// nodes current (YAML for `kubectl apply -f`, each with why; never applied here).
    ///
    /// A gap a Deployment not finished covers (running, or applied and not yet reconciled) is
    /// listed as in progress, never planned again. Exit 0: Deployments planned; 14: nothing to
    /// do; 15: only work in progress. With 14 and 15 stdout holds comments only: `status plan >
    /// plan.yaml && kubectl apply -f plan.yaml`.
    Plan {
        /// Only this NodeSet; repeat.
        #[arg(long = "nodeset")]
        nodesets: Vec<String>,
        /// yaml: the Deployments, each with a comment saying why; json: every step.
        #[arg(long, short = 'o', visible_alias = "output", value_enum, default_value_t = YamlOrJson::Yaml)]
        format: YamlOrJson,
        /// Also read the status objects `status report` wrote here (what was delivered before).
        #[arg(long, value_name = "DIR")]
        status_dir: Option<PathBuf>,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Write the status objects: server-side apply with --source kube, else YAML files in --status-dir.
    Report {
        /// With a directory source: where to write one YAML file per object (read back by show).
        #[arg(long, value_name = "DIR")]
        status_dir: Option<PathBuf>,
        /// With --source kube: the most the whole command may take (reading, asking Nova,
        /// writing; 429 and 5xx answers are retried within it), in seconds (or 90s, 5m).
        #[arg(long, value_name = "DURATION", default_value = "120")]
        timeout: String,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Make each node agent's identity for a NodeSet (with --source kube; run once per NodeSet,
    /// again after nodes are added or removed): per node a ServiceAccount, a Role and
    /// RoleBinding allowing only its own status object and Lease (and a token for itself), the
    /// status object and Lease, and one Secret of the NodeSet holding each node's kubeconfig
    /// with a bound, expiring token. Only what differs is written; a removed node loses its
    /// identity. Needs packaging/kubernetes/rbac-node-identities.yaml.
    Identities {
        /// The NodeSet (or the seeds' Role); repeat.
        #[arg(long = "nodeset", required = true)]
        nodesets: Vec<String>,
        /// The API server's URL as the nodes reach it (default: this command's kubeconfig's).
        #[arg(long, value_name = "URL")]
        server: Option<String>,
        /// The CA bundle (PEM) the nodes verify the API server with (default: this command's
        /// kubeconfig's).
        #[arg(long, value_name = "FILE")]
        certificate_authority: Option<PathBuf>,
        /// How long each initial token lives: seconds, or with a unit (at least 10m, at most a
        /// week). A token past half its lifetime is replaced when this runs again.
        #[arg(long, value_name = "DURATION", default_value = "24h")]
        credential_lifetime: String,
        /// The most the whole command may take, in seconds (or 90s, 5m).
        #[arg(long, value_name = "DURATION", default_value = "120")]
        timeout: String,
        /// text: a line per NodeSet; json: every object applied or deleted (never a token).
        #[arg(long, short = 'o', visible_alias = "output", value_enum, default_value_t = TextOrJson::Text)]
        format: TextOrJson,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Wait until nodes (or NodeSets) reach a phase, or hold a condition (`--for`); exit 11 on
    /// timeout, 12 on a terminal failure. Progress on stdout: rewritten in place on a terminal,
    /// a line per change when piped; at the timeout, the nodes grouped by what they wait for.
    Wait {
        // The phases and conditions, as the table of condition types names them.
        #[arg(
            help = format!("{}: all of them", edpm_core::condition::types::phases_said()),
            long,
            allow_hyphen_values = true,
            value_name = "PHASE",
            required_unless_present = "for_condition"
        )]
        phase: Option<String>,
        #[arg(
            help = format!(
                "Instead of a phase: {}. Wait for SecretsCurrent before revoking a rotated credential",
                edpm_core::condition::types::wait_explained()
            ),
            long = "for",
            value_name = "CONDITION",
            conflicts_with = "phase"
        )]
        for_condition: Option<String>,
        /// A node to wait for; repeat. Without --node and --nodeset: every node.
        #[arg(long = "node")]
        nodes: Vec<String>,
        /// A NodeSet or Role to wait for (its rollup); repeat.
        #[arg(long = "nodeset")]
        nodesets: Vec<String>,
        /// How long to wait: seconds, or with a unit (90s, 10m, 1h).
        #[arg(long, value_name = "DURATION")]
        timeout: String,
        /// How often to look again: seconds, or with a unit.
        #[arg(long, value_name = "DURATION", default_value = "10")]
        interval: String,
        /// Also read the status objects `status report` wrote here.
        #[arg(long, value_name = "DIR")]
        status_dir: Option<PathBuf>,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Keep the status objects current in the cluster: watch the evidence, re-evaluate the
    /// NodeSets a change touches, write what changed (a long-running controller).
    Controller {
        /// Where /metrics is served (OpenMetrics): :PORT, HOST:PORT, or 0 for off.
        #[arg(long, value_name = "ADDRESS", default_value = ":8443")]
        metrics_bind_address: String,
        /// Serve /metrics over HTTPS, only to a bearer token the API server authenticates
        /// (TokenReview) whose user may `get /metrics` (SubjectAccessReview);
        /// --metrics-secure=false serves plain HTTP to anyone (for development).
        #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set,
              num_args = 0..=1, default_missing_value = "true", require_equals = true)]
        metrics_secure: bool,
        /// The directory of /metrics' serving certificate and key (re-read when they change);
        /// without it, or while the files are absent, a self-signed certificate.
        #[arg(long, value_name = "DIR")]
        metrics_cert_path: Option<PathBuf>,
        /// The certificate's file name in --metrics-cert-path.
        #[arg(long, value_name = "FILE", default_value = "tls.crt")]
        metrics_cert_name: String,
        /// The key's file name in --metrics-cert-path.
        #[arg(long, value_name = "FILE", default_value = "tls.key")]
        metrics_cert_key: String,
        /// Where /healthz and /readyz are served: :PORT, HOST:PORT, or 0 for off.
        #[arg(long, value_name = "ADDRESS", default_value = ":8081")]
        health_probe_bind_address: String,
        /// Write only while holding the leader Lease (for more than one replica).
        #[arg(long)]
        leader_elect: bool,
        /// The leader Lease's name.
        #[arg(long, value_name = "NAME", default_value = "edpm-agent-status-controller")]
        leader_election_id: String,
        /// How long a leader Lease whose record does not change is waited on before another
        /// replica takes it over: seconds, or with a unit (client-go's default, 15s).
        #[arg(long, value_name = "DURATION", default_value = "15s")]
        leader_elect_lease_duration: String,
        /// How long after its last renewal the leader stops writing: shorter than the lease
        /// duration.
        #[arg(long, value_name = "DURATION", default_value = "10s")]
        leader_elect_renew_deadline: String,
        /// How often the Lease is read, and renewed while held.
        #[arg(long, value_name = "DURATION", default_value = "2s")]
        leader_elect_retry_period: String,
        /// How long a burst of changes is gathered into one evaluation, in milliseconds.
        #[arg(long, value_name = "MS", default_value = "200")]
        debounce_ms: u64,
        /// On SIGTERM, how long in-flight writes may finish: seconds, or with a unit.
        #[arg(long, value_name = "DURATION", default_value = "10")]
        grace_period: String,
        /// Where the watch of CRDs is refused (an RBAC without list and watch on
        /// customresourcedefinitions), how often a kind whose CRD is not installed (an operator
        /// not deployed yet) is looked for again: seconds, or with a unit. With the watch, a
        /// CRD installed is seen at once and nothing is asked meanwhile.
        #[arg(long, value_name = "DURATION", default_value = "30")]
        crd_recheck: String,
        /// How often Nova is asked about the computes (only while some node runs nova):
        /// seconds, or with a unit; each wait is jittered by up to 10 %, and a Nova that
        /// cannot be asked is asked again after a growing wait (up to 5 minutes).
        #[arg(long, value_name = "DURATION", default_value = "30")]
        nova_interval: String,
        /// Secrets and ConfigMaps are watched metadata-only, so that a rotated one turns the
        /// nodes holding the old one stale (`SecretsCurrent`) at once; where the RBAC refuses
        /// list or watch on them, how often the delivered ones are rechecked by name instead
        /// (metadata only): seconds, or with a unit; 0 for never.
        #[arg(long, value_name = "DURATION", default_value = "10")]
        inputs_interval: String,
        #[command(flatten)]
        node_identities: Box<NodeIdentityArgs>,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Print the CustomResourceDefinitions of edpm-agent's status objects (YAML).
    Crds {},
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum YamlOrJson {
    Yaml,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShowFormat {
    Table,
    Wide,
    Json,
}

#[derive(Debug, Args)]
pub struct StageArgs {
    /// The node (Node name, NodeSet node key, or inventory hostname).
    #[arg(long)]
    pub node: String,
    /// The root to stage under: `/` on the node itself.
    #[arg(long, value_name = "DIR")]
    pub root: PathBuf,
    /// Templates directory overriding the embedded ones (see render).
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
}

#[derive(Debug, Args)]
pub struct MountsArgs {
    #[command(subcommand)]
    pub action: MountsAction,
}

#[derive(Debug, Subcommand)]
pub enum MountsAction {
    /// The volumes and mounts that reach a caller identity, in pod order, with warnings (JSON).
    Propagate {
        /// The caller's identity list, as the pod builds it: service, group, instance, e.g.
        /// `--as Cinder CinderVolume ceph`, `--as Glance GlanceAPI default`, `--as Compute`.
        #[arg(long = "as", value_name = "IDENTITY", required = true, num_args = 1..)]
        identity: Vec<String>,
        /// For `--as Compute`: the node whose Role/NodeSet nodeTemplate.extraMounts is the local list.
        #[arg(long)]
        node: Option<String>,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// What `stage` would change for a node under a root: paths, modes, hashes, never contents.
    Plan {
        /// The node (Node name, NodeSet node key, or inventory hostname).
        #[arg(long)]
        node: String,
        /// The root `stage` would write under: `/` on the node itself.
        #[arg(long, value_name = "DIR")]
        root: PathBuf,
        /// text: one line per file; json: the steps as a list.
        #[arg(long, short = 'o', visible_alias = "output", value_enum, default_value_t = TextOrJson::Text)]
        format: TextOrJson,
        /// Templates directory overriding the embedded ones (see render).
        #[arg(long, value_name = "DIR")]
        templates: Option<PathBuf>,
        #[command(flatten)]
        source: SourceArgs,
    },
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Node (Node name, NodeSet node key, or inventory hostname); repeat, or omit for all.
    #[arg(long = "node")]
    pub nodes: Vec<String>,
    /// Service (nova, neutron-metadata, neutron-ovn, neutron-sriov, neutron-dhcp); repeat,
    /// or omit for every one the node runs.
    #[arg(long = "service")]
    pub services: Vec<String>,
    /// Directory to write into: DIR/<service>/ for one node (the layout of
    /// /var/lib/openstack/configs on the node), DIR/<node>/<service>/ for several.
    #[arg(long, value_name = "DIR", required_unless_present = "redact")]
    pub out: Option<PathBuf>,
    /// Write one merged file per service instead of the layered files.
    #[arg(long)]
    pub merged: bool,
    /// Print what would be written, secrets masked, and write nothing.
    #[arg(long, conflicts_with = "check")]
    pub redact: bool,
    /// Compare with the files in --out and exit 10 when they differ; write nothing.
    #[arg(long)]
    pub check: bool,
    /// Read templates from this directory (same relative paths) instead of the embedded ones.
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
    /// text: the files written; json: a report {changed, unchanged} of paths, for Ansible's
    /// changed_when.
    #[arg(long, short = 'o', visible_alias = "output", value_enum, default_value_t = TextOrJson::Text)]
    pub format: TextOrJson,
    #[command(flatten)]
    pub source: SourceArgs,
}

#[derive(Debug, Args)]
pub struct DeriveArgs {
    #[command(subcommand)]
    pub what: DeriveWhat,
}

#[derive(Debug, Subcommand)]
pub enum DeriveWhat {
    /// The NovaExternalCompute CR of every node with a nova.openstack.org/cell annotation.
    Novaexternalcompute {
        /// yaml: a multi-document stream; json: a list.
        #[arg(long, short = 'o', visible_alias = "output", value_enum, default_value_t = ExportFormat::Yaml)]
        format: ExportFormat,
        /// With --source kube: server-side apply them (field manager edpm-agent).
        #[arg(long)]
        apply: bool,
        #[command(flatten)]
        source: SourceArgs,
    },
}

#[derive(Debug, Args)]
pub struct OsloArgs {
    #[command(subcommand)]
    pub action: OsloAction,
    /// text (the default) for people; json for tools. For merge, a value that is neither is the
    /// file to write (the old spelling of --output-file).
    #[arg(long, short = 'o', visible_alias = "output", global = true, action = clap::ArgAction::Append,
          value_name = "FORMAT", value_parser = format_or_file::<TextOrJson>())]
    pub format: Vec<Output<TextOrJson>>,
}

/// `--config-file`/`--config-dir` as oslo takes them: in command-line order, which `parse`
/// recovers from clap's indices into [`LayersArgs::order`].
#[derive(Debug, Args, Default)]
pub struct LayersArgs {
    /// A config file, read where it appears among the layers.
    #[arg(long = "config-file", value_name = "FILE")]
    pub config_file: Vec<PathBuf>,
    /// A config directory: its *.conf files in sorted order, read where it appears.
    #[arg(long = "config-dir", value_name = "DIR")]
    pub config_dir: Vec<PathBuf>,
    /// Both lists merged in command-line order (filled by [`parse`]).
    #[arg(skip)]
    pub order: Vec<LayerArg>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayerArg {
    File(PathBuf),
    Dir(PathBuf),
}

#[derive(Debug, Subcommand)]
pub enum OsloAction {
    /// Parse one file as oslo.config does; on malformed input exit 1 naming file and line.
    Parse {
        /// The oslo.config file.
        file: PathBuf,
    },
    /// The effective raw value of GROUP KEY across the layers, and where it came from.
    Get {
        #[command(flatten)]
        layers: LayersArgs,
        /// The option is multi-valued (MultiStrOpt): every value of every layer.
        #[arg(long)]
        multi: bool,
        /// The section, e.g. DEFAULT.
        group: String,
        /// The option name.
        key: String,
    },
    /// Every option set in the layers: its value, the layer that set it, what it overrode.
    Explain {
        #[command(flatten)]
        layers: LayersArgs,
    },
    /// Check a CustomServiceConfig snippet: oslo's errors plus likely mistakes.
    Lint {
        /// The snippet to check.
        file: PathBuf,
        /// Exit 1 on warnings too.
        #[arg(long)]
        strict: bool,
    },
    /// Merge the layers into one file with the same effective values.
    Merge {
        #[command(flatten)]
        layers: LayersArgs,
        /// Write here (atomically, mode 0600) instead of stdout.
        #[arg(long, value_name = "FILE")]
        output_file: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct InventoryArgs {
    /// Print the whole inventory as JSON (Ansible dynamic inventory contract).
    #[arg(long, conflicts_with = "host")]
    pub list: bool,
    /// Print the variables of one host as JSON.
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Indent the JSON.
    #[arg(long)]
    pub pretty: bool,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(subcommand)]
    pub action: Option<InventoryAction>,
}

#[derive(Debug, Subcommand)]
pub enum InventoryAction {
    /// Write a static inventory.
    Export {
        /// yaml (the default) matches the layout of the operator's inventory Secret; json is the
        /// same tree as JSON; ini writes values as Python literals. A value that is none of
        /// them is the file to write (the old spelling of --output-file).
        #[arg(long, short = 'o', visible_alias = "output", action = clap::ArgAction::Append,
              value_name = "FORMAT", value_parser = format_or_file::<ExportFormat>())]
        format: Vec<Output<ExportFormat>>,
        /// Write to this file (atomically, mode 0600) instead of stdout.
        #[arg(long, value_name = "FILE")]
        output_file: Option<PathBuf>,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Show where each variable of a host came from and what it overrode.
    Explain {
        /// The host (inventory hostname, node name or host name).
        host: String,
        /// One variable; omit for all of the host's variables.
        var: Option<String>,
        /// text for people; json for tools.
        #[arg(long, short = 'o', visible_alias = "output", value_enum, default_value_t = TextOrJson::Text)]
        format: TextOrJson,
        /// Show values that came from Secrets instead of redacting them.
        #[arg(long)]
        show_secrets: bool,
        #[command(flatten)]
        source: SourceArgs,
    },
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// text: one line per problem and a summary; json: the diagnostics as a list.
    #[arg(long, short = 'o', visible_alias = "output", value_enum, default_value_t = TextOrJson::Text)]
    pub format: TextOrJson,
    #[command(flatten)]
    pub source: SourceArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    Yaml,
    Ini,
    Json,
}

/// `status controller --node-identities` and its flags.
#[derive(Debug, Clone, Args)]
pub struct NodeIdentityArgs {
    /// Keep each NodeSet's node agent identities as `status identities` makes them (the
    /// leader, after evaluating the NodeSet: when its nodes change, and every
    /// --node-identities-interval). Needs packaging/kubernetes/rbac-node-identities.yaml.
    #[arg(long)]
    pub node_identities: bool,
    /// With --node-identities: the API server's URL as the nodes reach it (default: the
    /// controller's own).
    #[arg(long, value_name = "URL", requires = "node_identities")]
    pub node_identities_server: Option<String>,
    /// With --node-identities: the CA bundle (PEM) the nodes verify it with (default: the
    /// controller's own).
    #[arg(long, value_name = "FILE", requires = "node_identities")]
    pub node_identities_certificate_authority: Option<PathBuf>,
    /// With --node-identities: each initial token's lifetime.
    #[arg(long, value_name = "DURATION", default_value = "24h")]
    pub node_identities_credential_lifetime: String,
    /// With --node-identities: the longest time between two passes over a NodeSet whose
    /// nodes did not change.
    #[arg(long, value_name = "DURATION", default_value = "10m")]
    pub node_identities_interval: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TextOrJson {
    Text,
    Json,
}

/// Parses the command line, including the interleaved order of `--config-file` and
/// `--config-dir`, which derive alone loses.
pub fn parse(args: Vec<OsString>) -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let mut command = Cli::command();
    if is_kubectl_plugin(&args) {
        // Usage and help say what the user typed.
        command =
            command.bin_name("kubectl edpm").about(KUBECTL_PLUGIN_ABOUT).long_about(KUBECTL_PLUGIN_ABOUT);
    }
    let matches = command.try_get_matches_from_mut(normalize_args(args))?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    match cli.command.source_args() {
        Some(after) => cli.source = std::mem::take(&mut cli.source).merged(after),
        None if !cli.source.is_empty() => {
            let what = match cli.command {
                Command::Node(_) => "the node agent reads its own config file (node --config)",
                _ => "oslo commands read only the files they name",
            };
            return Err(command.error(
                clap::error::ErrorKind::ArgumentConflict,
                format!("{what}: --source, --config and the other source options do not apply"),
            ));
        }
        None => {}
    }
    if let Command::Oslo(oslo) = &mut cli.command
        && let Some(("oslo", m)) = matches.subcommand()
        && let Some((_, sm)) = m.subcommand()
    {
        let layers = match &mut oslo.action {
            OsloAction::Get { layers, .. }
            | OsloAction::Explain { layers }
            | OsloAction::Merge { layers, .. } => layers,
            _ => return Ok(cli),
        };
        let mut order: Vec<(usize, LayerArg)> = Vec::new();
        for (id, make) in
            [("config_file", LayerArg::File as fn(PathBuf) -> LayerArg), ("config_dir", LayerArg::Dir)]
        {
            if let (Some(idx), Some(vals)) = (sm.indices_of(id), sm.get_many::<PathBuf>(id)) {
                order.extend(idx.zip(vals).map(|(i, v)| (i, make(v.clone()))));
            }
        }
        order.sort_by_key(|(i, _)| *i);
        layers.order = order.into_iter().map(|(_, l)| l).collect();
    }
    Ok(cli)
}

/// The name kubectl runs a plugin by: `kubectl edpm status show` runs `kubectl-edpm status
/// show` from the PATH (kubectl passes every argument after the plugin's name, its own
/// `--context`, `-n` and `--kubeconfig` included, which the source options take as kubectl does).
pub const KUBECTL_PLUGIN: &str = "kubectl-edpm";

/// What `kubectl edpm --help` leads with: what the plugin reads by default and the loop it is for.
const KUBECTL_PLUGIN_ABOUT: &str = "edpm-agent as a kubectl plugin: reads the cluster (--source kube) \
    through the current kubeconfig context, in that context's namespace (-n/--namespace, \
    --context, --kubeconfig as kubectl takes them). The data plane's readiness: `kubectl edpm \
    status show`, `status explain NODE`, `status plan > plan.yaml && kubectl apply -f \
    plan.yaml`, `status wait --for VersionCurrent --nodeset NAME`.";

/// Whether the binary runs as the kubectl plugin (`args[0]` named [`KUBECTL_PLUGIN`]): then
/// its source is the cluster unless `--source` or `EDPM_AGENT_SOURCE` says otherwise.
pub fn is_kubectl_plugin(args: &[OsString]) -> bool {
    args.first().and_then(|a| std::path::Path::new(a).file_name()).is_some_and(|n| n == KUBECTL_PLUGIN)
}

/// Installed or linked as `edpm-inventory`, the binary is `edpm-agent inventory`, so that
/// `ansible-playbook -i /usr/bin/edpm-inventory` works.
pub fn normalize_args(mut args: Vec<OsString>) -> Vec<OsString> {
    let invoked_as =
        args.first().and_then(|a| std::path::Path::new(a).file_name()).and_then(|n| n.to_str()).unwrap_or("");
    if invoked_as == "edpm-inventory" {
        args[0] = "edpm-agent".into();
        args.insert(1, "inventory".into());
    }
    args
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }

    #[test]
    fn inventory_alias_inserts_the_subcommand() {
        let args = normalize_args(vec!["/usr/bin/edpm-inventory".into(), "--list".into()]);
        assert_eq!(args, ["edpm-agent", "inventory", "--list"]);
        let cli = Cli::try_parse_from(args).unwrap();
        assert!(matches!(cli.command, Command::Inventory(InventoryArgs { list: true, .. })));
    }

    #[test]
    fn oslo_layers_keep_command_line_order() {
        let args = [
            "edpm-agent",
            "oslo",
            "get",
            "--config-file",
            "a",
            "--config-dir",
            "d",
            "--config-file",
            "b",
            "DEFAULT",
            "k",
        ];
        let cli = parse(args.iter().map(OsString::from).collect()).unwrap();
        let Command::Oslo(OsloArgs { action: OsloAction::Get { layers, .. }, .. }) = cli.command else {
            panic!()
        };
        assert_eq!(
            layers.order,
            [LayerArg::File("a".into()), LayerArg::Dir("d".into()), LayerArg::File("b".into())]
        );
    }

    #[test]
    fn every_argument_is_described() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let builtin = matches!(a.get_id().as_str(), "help" | "version");
                if !builtin && a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {}", a.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "edpm-agent", &mut missing);
        assert!(missing.is_empty(), "arguments without a description: {missing:?}");
    }

    #[test]
    fn source_options_merge_before_and_after_the_command() {
        let cli = parse(
            ["edpm-agent", "-n", "a", "--source", "x", "validate", "--source", "y", "-n", "b"]
                .iter()
                .map(OsString::from)
                .collect(),
        )
        .unwrap();
        assert_eq!(cli.source.sources, ["x", "y"]);
        assert_eq!(cli.source.namespace.as_deref(), Some("b"), "after the command wins");
    }

    #[test]
    fn dash_o_is_the_format_and_a_files_old_spelling_where_a_command_writes_one() {
        let parsed = |args: &[&str]| parse(args.iter().map(OsString::from).collect()).unwrap().command;
        let Command::Inventory(InventoryArgs {
            action: Some(InventoryAction::Export { format, .. }), ..
        }) = parsed(&["edpm-agent", "inventory", "export", "-o", "json", "--output", "hosts.yaml"])
        else {
            panic!("not inventory export")
        };
        assert_eq!(format, [Output::Format(ExportFormat::Json), Output::File("hosts.yaml".into())]);
        let Command::Oslo(oslo) =
            parsed(&["edpm-agent", "oslo", "merge", "--config-file", "a", "-o", "m.conf"])
        else {
            panic!("not oslo")
        };
        assert_eq!(oslo.format, [Output::File("m.conf".into())]);
        for show in [["-o", "wide"], ["--output", "wide"], ["--format", "wide"]] {
            let Command::Status(StatusArgs { action: StatusAction::Show { format, .. }, .. }) =
                parsed(&["edpm-agent", "status", "show", show[0], show[1]])
            else {
                panic!("not status show")
            };
            assert_eq!(format, ShowFormat::Wide);
        }
        let Command::Validate(v) = parsed(&["edpm-agent", "validate", "-o", "json"]) else {
            panic!("not validate")
        };
        assert_eq!(v.format, TextOrJson::Json);
    }

    #[test]
    fn list_and_host_conflict() {
        assert!(Cli::try_parse_from(["edpm-agent", "inventory", "--list", "--host", "h"]).is_err());
    }
}
