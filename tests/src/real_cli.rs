//! Running the real Copilot CLI (`@github/copilot`, installed by `npm ci` at
//! the repository root) in tests, kept on this machine: isolated home,
//! config, state and cache folders in a temporary directory, no automatic
//! update or login, and proxies pointing at a loopback port that refuses, so
//! that a request which ignores the configured endpoints never leaves.

use std::ffi::OsString;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use copilot_host::{ClientOptions, SessionConfig, Transport};
use copilot_testkit::scripted_model::ScriptedModel;

/// The native CLI binary: `COPILOT_CLI_PATH`, or the npm install at the
/// repository root. Panics with the fix if neither exists: these tests never
/// skip.
pub fn cli_path() -> PathBuf {
    if let Some(p) = std::env::var_os("COPILOT_CLI_PATH").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent");
    let loader = root.join("node_modules/.bin/copilot");
    copilot_host::native_binary(&loader)
        .or_else(|| loader.is_file().then_some(loader))
        .unwrap_or_else(|| panic!("the Copilot CLI is not installed: run `npm ci` in {}", root.display()))
}

/// A temporary folder removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh folder under the system temp dir.
    pub fn new(prefix: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir =
            std::env::temp_dir().join(format!("{prefix}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loopback address that refuses connections: bound, then released.
pub fn refusing_proxy() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("local addr").port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

/// Options that start the real CLI isolated in `dir`, with `extra_env`
/// added (for example `COPILOT_API_URL` of a scripted model server).
pub fn isolated_options(transport: Transport, dir: &Path, proxy: &str) -> ClientOptions {
    let folder = |name: &str| {
        let p = dir.join(name);
        std::fs::create_dir_all(&p).expect("create state folder");
        p.into_os_string()
    };
    let env: Vec<(OsString, OsString)> = vec![
        ("COPILOT_HOME".into(), folder("home")),
        ("XDG_CONFIG_HOME".into(), folder("config")),
        ("XDG_STATE_HOME".into(), folder("state")),
        ("XDG_CACHE_HOME".into(), folder("cache")),
        ("COPILOT_CACHE_HOME".into(), folder("cache")),
        ("GH_CONFIG_DIR".into(), folder("gh")),
        ("HTTP_PROXY".into(), proxy.into()),
        ("HTTPS_PROXY".into(), proxy.into()),
        ("http_proxy".into(), proxy.into()),
        ("https_proxy".into(), proxy.into()),
        ("NO_PROXY".into(), "127.0.0.1,localhost,::1".into()),
        ("no_proxy".into(), "127.0.0.1,localhost,::1".into()),
    ];
    ClientOptions {
        cli_path: Some(cli_path()),
        transport,
        env,
        extra_args: vec!["--no-auto-login".into()],
        cwd: Some(dir.to_owned()),
        ..ClientOptions::default()
    }
}

/// Options that start the real CLI isolated in `dir`, its model the
/// scripted `model` (which is also its proxy), logged in with a token the
/// model server accepts.
pub fn scripted_options(transport: Transport, dir: &Path, model: &ScriptedModel) -> ClientOptions {
    let mut options = isolated_options(transport, dir, &model.url());
    options.env.extend(model.env());
    options.auth_token = Some("scripted-token".into());
    options
}

/// A session on the scripted model, working in its own folder
/// `dir/work/name`.
pub fn scripted_session(dir: &Path, name: &str) -> SessionConfig {
    let work = dir.join("work").join(name);
    std::fs::create_dir_all(&work).expect("create the working folder");
    SessionConfig { working_directory: Some(work), ..SessionConfig::with_model(ScriptedModel::MODEL) }
}
