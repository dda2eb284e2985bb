/// The console's style sheet: system fonts only, one accent colour, status colours that read in grey too.
enum ConsoleCSS {
    static let sheet = #"""
        :root {
          --bg: #f4f6f9; --card: #ffffff; --ink: #1b2430; --muted: #5d6b7c; --line: #e2e7ee;
          --accent: #2357c6; --accent-ink: #ffffff;
          --ok: #0f7b45; --ok-bg: #e3f5eb; --warn: #8a5a00; --warn-bg: #fff3d6;
          --bad: #b42318; --bad-bg: #fde8e6; --off: #4b5563; --off-bg: #eceff3; --info: #1d4ed8; --info-bg: #e5edff;
          font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
          font-size: 14px; color: var(--ink); background: var(--bg);
        }
        * { box-sizing: border-box; }
        body { margin: 0; }
        .mono, code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 12.5px; }
        .bar { display: flex; align-items: center; justify-content: space-between; padding: 12px 28px;
          background: #101828; color: #fff; }
        .brand { font-weight: 600; font-size: 15px; letter-spacing: .2px; display: flex; align-items: center; gap: 10px; }
        .logo { display: inline-grid; place-items: center; width: 26px; height: 26px; border-radius: 7px;
          background: var(--accent); font-size: 15px; }
        .session { display: flex; gap: 14px; align-items: center; color: #cfd6e1; }
        main { max-width: 1240px; margin: 24px auto; padding: 0 28px; }
        footer { text-align: center; padding: 18px 0 28px; }
        h1 { font-size: 20px; margin: 0 0 6px; }
        h2 { font-size: 15px; margin: 0 0 12px; }
        h3 { font-size: 13px; margin: 18px 0 8px; color: var(--muted); text-transform: uppercase; letter-spacing: .4px; }
        .card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 18px 20px;
          margin-bottom: 18px; box-shadow: 0 1px 2px rgba(16, 24, 40, .04); }
        .narrow { max-width: 420px; margin: 60px auto; }
        .grid { display: grid; grid-template-columns: minmax(0, 1fr); gap: 18px; }
        .grid .card { margin-bottom: 0; }
        .grid + .card { margin-top: 18px; }
        label { display: block; font-weight: 600; margin: 14px 0 6px; }
        input { width: 100%; padding: 10px 12px; border: 1px solid #c9d2de; border-radius: 8px; font-size: 14px;
          background: #fff; color: var(--ink); }
        input:focus { outline: 2px solid rgba(35, 87, 198, .35); border-color: var(--accent); }
        button { font: inherit; cursor: pointer; border-radius: 8px; padding: 10px 16px; border: 1px solid transparent; }
        .primary { background: var(--accent); color: var(--accent-ink); font-weight: 600; }
        .primary:hover { background: #1c47a3; }
        .secondary { background: #fff; border-color: #c9d2de; color: var(--ink); margin-top: 8px; }
        .link { background: none; color: #cfd6e1; padding: 0; text-decoration: underline; }
        #login-form button { margin-top: 16px; width: 100%; }
        .search { display: flex; gap: 10px; }
        .search input { flex: 1; font-size: 15px; padding: 12px 14px; }
        .status { min-height: 20px; margin: 10px 2px; color: var(--muted); }
        .status.error, .error { color: var(--bad); }
        .muted { color: var(--muted); }
        .small { font-size: 12.5px; font-weight: 400; }
        .answer-head { display: flex; justify-content: space-between; align-items: flex-start; gap: 20px; }
        .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .4px; }
        .account { font-size: 17px; font-weight: 600; margin-top: 2px; word-break: break-all; }
        .asof { text-align: right; font-size: 12.5px; }
        .verdict-line { font-size: 16px; margin: 14px 0 2px; line-height: 1.5; }
        .pills { display: flex; flex-wrap: wrap; gap: 8px; margin-top: 12px; }
        .pill { display: inline-flex; align-items: center; gap: 8px; padding: 6px 12px; border-radius: 8px;
          font-weight: 600; font-size: 14px; }
        .pill .detail { font-weight: 400; font-size: 12.5px; opacity: .85; }
        table { width: 100%; border-collapse: collapse; }
        th { text-align: left; font-size: 11.5px; text-transform: uppercase; letter-spacing: .4px; color: var(--muted);
          font-weight: 600; padding: 6px 8px; border-bottom: 1px solid var(--line); }
        td { padding: 8px; border-bottom: 1px solid var(--line); vertical-align: top; overflow-wrap: anywhere; }
        tr:last-child td { border-bottom: none; }
        .badge { display: inline-block; padding: 2px 9px; border-radius: 999px; font-size: 12px; font-weight: 600;
          white-space: nowrap; }
        .ok { color: var(--ok); background: var(--ok-bg); }
        .warn { color: var(--warn); background: var(--warn-bg); }
        .bad { color: var(--bad); background: var(--bad-bg); }
        .off { color: var(--off); background: var(--off-bg); }
        .info { color: var(--info); background: var(--info-bg); }
        .store { font-weight: 500; border: 1px solid currentColor; background: transparent; }
        .store-app_store { color: #1f2937; }
        .store-google_play { color: #0b6b3a; }
        .store-other { color: var(--off); }
        .timeline { list-style: none; margin: 0; padding: 0; }
        .timeline > li { display: grid; grid-template-columns: 150px 140px minmax(0, 1fr); gap: 14px; padding: 10px 4px;
          border-bottom: 1px solid var(--line); }
        .timeline > li:last-child { border-bottom: none; }
        .timeline .when { color: var(--muted); font-size: 12.5px; }
        .timeline .what { font-weight: 500; }
        .timeline .owner { color: #9a3412; margin-top: 2px; }
        .timeline .why { margin-top: 3px; color: var(--ink); }
        .timeline .meta { margin-top: 4px; color: var(--muted); font-size: 12px; }
        .timeline .notes { margin: 4px 0 0; padding-left: 18px; color: var(--muted); font-size: 12.5px; }
        .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
        [hidden] { display: none !important; }
        """#
}
