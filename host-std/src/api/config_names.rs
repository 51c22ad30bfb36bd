//! The names of [`SessionConfig`]'s options, and which of the two open
//! requests takes each: the lists the tests hold to the core's and the
//! JavaScript package's.

use super::config::SessionConfig;

/// Lists the fields of [`SessionConfig`] by destructuring it without `..`:
/// a field added to the struct and not here fails to compile.
macro_rules! option_names {
    ($($field:ident),* $(,)?) => {
        /// The name of every option (every field but `handlers`), as written
        /// here; the JavaScript package names each the same in camelCase.
        pub fn option_names() -> Vec<&'static str> {
            let SessionConfig { $($field: _,)* handlers: _ } = SessionConfig::default();
            vec![$(stringify!($field)),*]
        }
    };
}

impl SessionConfig {
    option_names!(
        session_id,
        server_assigned_id,
        client_name,
        model,
        reasoning_effort,
        reasoning_summary,
        context_tier,
        model_capabilities,
        enable_experimental_mode,
        working_directory,
        additional_directories,
        config_directory,
        enable_config_discovery,
        streaming,
        include_sub_agent_streaming_events,
        system_message,
        available_tools,
        excluded_tools,
        tool_search,
        excluded_builtin_agents,
        provider,
        capi,
        providers,
        models,
        mcp_servers,
        mcp_oauth_token_storage,
        disabled_mcp_servers,
        enable_mcp_apps,
        github_mcp_tool_config,
        custom_agents,
        custom_agents_local_only,
        default_agent,
        agent,
        skill_directories,
        disabled_skills,
        plugin_directories,
        instruction_directories,
        infinite_sessions,
        memory,
        large_output,
        session_limits,
        enable_session_telemetry,
        enable_citations,
        enable_file_change_tracking,
        github_token,
        enable_managed_settings,
        managed_settings,
        skip_embedding_retrieval,
        embedding_cache_storage,
        organization_custom_instructions,
        enable_on_demand_instruction_discovery,
        enable_file_hooks,
        enable_host_git_operations,
        enable_session_store,
        enable_skills,
        remote_session,
        skip_custom_instructions,
        coauthor_enabled,
        manage_schedule_enabled,
        canvases,
        request_canvas_renderer,
        request_extensions,
        extension_sdk_path,
        extension_info,
        canvas_provider,
        cloud,
        suppress_resume_event,
        continue_pending_work,
        open_canvases,
        exp_assignments,
    );

    /// Options only `session.create` takes.
    pub const CREATE_ONLY: &'static [&'static str] = &["session_id", "server_assigned_id", "cloud"];
    /// Options only `session.resume` takes.
    pub const RESUME_ONLY: &'static [&'static str] =
        &["suppress_resume_event", "continue_pending_work", "open_canvases"];
}
