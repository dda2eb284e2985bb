/// The console's page: a login form and the lookup view (filled by `app.js`).
enum ConsoleHTML {
    static let page = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Entitlement console · verify-worker</title>
        <link rel="stylesheet" href="/console/app.css">
        <script src="/console/app.js" defer></script>
        </head>
        <body>
        <header class="bar">
          <div class="brand"><span class="logo" aria-hidden="true">✓</span> Entitlement console</div>
          <div class="session" id="session" hidden>
            <span id="caller"></span>
            <button type="button" class="link" id="logout">Sign out</button>
          </div>
        </header>

        <main>
          <section id="login" class="card narrow" hidden>
            <h1>Sign in</h1>
            <p class="muted">Use an API token of this entitlement service.</p>
            <form id="login-form" autocomplete="off">
              <label for="token">Access token</label>
              <input id="token" name="token" type="password" required spellcheck="false">
              <button type="submit" class="primary">Sign in</button>
              <p id="login-error" class="error" role="alert" hidden></p>
            </form>
          </section>

          <section id="app" hidden>
            <form id="search" class="search" autocomplete="off">
              <label for="query" class="visually-hidden">Account, transaction or original transaction id</label>
              <input id="query" name="query" placeholder="Account id, transaction id, original transaction id, or a Google Play order id or purchase token" required spellcheck="false">
              <button type="submit" class="primary">Look up</button>
            </form>
            <p id="status" class="status" role="status"></p>

            <div id="result" hidden>
              <div class="card answer" id="answer">
                <div class="answer-head">
                  <div>
                    <div class="label">Account</div>
                    <div class="account mono" id="account-id"></div>
                  </div>
                  <div class="asof muted" id="as-of"></div>
                </div>
                <div class="pills" id="pills"></div>
                <p class="verdict-line" id="summary"></p>
                <p class="muted small" id="match-note" hidden></p>
              </div>

              <div class="grid">
                <section class="card">
                  <h2>Entitlements now</h2>
                  <table id="entitlements"><thead><tr>
                    <th>Entitlement</th><th>Status</th><th>Product</th><th>Expires</th><th>Original transaction</th><th>Env.</th><th>Store</th>
                  </tr></thead><tbody></tbody></table>
                  <p class="muted small" id="no-entitlements" hidden>No entitlement: nothing granting one has been read for this account.</p>
                  <div id="consumables-block" hidden>
                    <h3>Consumables bought</h3>
                    <table id="consumables"><thead><tr><th>Product</th><th>Units</th><th>Store</th></tr></thead><tbody></tbody></table>
                  </div>
                </section>

                <section class="card">
                  <h2>Transactions</h2>
                  <table id="transactions"><thead><tr>
                    <th>Transaction</th><th>Product</th><th>State</th><th>Purchased</th><th>Expires</th><th>Refunded</th><th>Store</th>
                  </tr></thead><tbody></tbody></table>
                  <p class="muted small" id="no-transactions" hidden>No transaction recorded for this account.</p>
                </section>
              </div>

              <section class="card">
                <h2>Timeline <span class="muted small">newest first: the verdicts read and the changes they made</span></h2>
                <ol id="timeline" class="timeline"></ol>
                <button type="button" id="more" class="secondary" hidden>Show older</button>
              </section>
            </div>
          </section>
        </main>
        <footer class="muted small">verify-worker entitlement service · data from the public verdict contract</footer>
        </body>
        </html>
        """#
}
