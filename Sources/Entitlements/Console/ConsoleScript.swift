/// The console's script: login, lookup, and rendering with DOM text nodes only (no HTML from data).
enum ConsoleScript {
    static let source = #"""
        'use strict';
        (function () {
          const $ = (id) => document.getElementById(id);
          const storageKey = 'verify-entitlements-token';
          let token = sessionStorage.getItem(storageKey);
          let current = null;

          function el(tag, className, text) {
            const node = document.createElement(tag);
            if (className) node.className = className;
            if (text !== undefined && text !== null) node.textContent = String(text);
            return node;
          }
          function badge(text, kind) { return el('span', 'badge ' + kind, text); }
          function cell(row, content, className) {
            const td = el('td', className);
            if (content instanceof Node) td.appendChild(content); else td.textContent = content == null ? '—' : String(content);
            row.appendChild(td);
            return td;
          }
          function pad(n) { return String(n).padStart(2, '0'); }
          function when(iso) {
            if (!iso) return '—';
            const d = new Date(iso);
            if (isNaN(d.getTime())) return iso;
            return d.getUTCFullYear() + '-' + pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate()) + ' ' +
              pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes()) + ' UTC';
          }
          function day(iso) { return iso ? when(iso).slice(0, 10) : '—'; }
          const storeNames = { app_store: 'App Store', google_play: 'Google Play' };
          function storeName(store) { return storeNames[store || 'app_store'] || String(store); }
          function storeBadge(store) {
            const known = storeNames[store || 'app_store'] ? (store || 'app_store') : 'other';
            return badge(storeName(store), 'store store-' + known);
          }
          function setStatus(text, isError) {
            const status = $('status');
            status.textContent = text || '';
            status.className = 'status' + (isError ? ' error' : '');
          }

          async function api(path) {
            const response = await fetch(path, { headers: { 'Authorization': 'Bearer ' + token }, cache: 'no-store' });
            let body = null;
            try { body = await response.json(); } catch (e) { body = null; }
            if (response.status === 401) { signOut('Your token was not accepted. Sign in again.'); }
            return { status: response.status, body: body };
          }

          function showLogin(message) {
            $('login').hidden = false;
            $('app').hidden = true;
            $('session').hidden = true;
            const error = $('login-error');
            error.textContent = message || '';
            error.hidden = !message;
            $('token').focus();
          }
          function showApp(caller, scopes) {
            $('login').hidden = true;
            $('app').hidden = false;
            $('session').hidden = false;
            $('caller').textContent = 'Signed in as ' + caller + ((scopes || []).indexOf('support') >= 0 ? ' (support)' : '');
            $('query').focus();
          }
          function signOut(message) {
            sessionStorage.removeItem(storageKey);
            token = null;
            showLogin(message);
          }

          async function startSession(candidate, fromForm) {
            token = candidate;
            let result;
            try { result = await fetch('/v1/session', { headers: { 'Authorization': 'Bearer ' + token }, cache: 'no-store' }); }
            catch (e) { showLogin('The service did not answer. Try again.'); return; }
            if (result.status === 200) {
              const body = await result.json();
              sessionStorage.setItem(storageKey, token);
              showApp(body.caller, body.scopes);
              const wanted = new URLSearchParams(location.hash.slice(1)).get('q');
              if (wanted) { $('query').value = wanted; lookup(wanted); }
            } else if (result.status === 429) {
              token = null;
              showLogin('Too many attempts. Wait a moment and try again.');
            } else {
              token = null;
              sessionStorage.removeItem(storageKey);
              showLogin(fromForm ? 'That token is not valid.' : '');
            }
          }

          // How each transaction was revoked, as the verdicts in the timeline say (revocation_type, _percentage).
          let revocations = {};
          function collectRevocations(entries) {
            for (const entry of entries) {
              for (const r of entry.revocations || []) {
                if (r.revocation_type && !revocations[r.transaction_id]) revocations[r.transaction_id] = r;
              }
            }
          }
          function percent(milliunits) {
            const tenths = Math.round(milliunits / 100);
            return (tenths % 10 === 0 ? String(tenths / 10) : (tenths / 10).toFixed(1)) + ' %';
          }
          // The words for a revoked transaction: refunded, refunded in part (with its share), or Family Sharing ended.
          function revokedLabel(transactionID) {
            const r = revocations[transactionID];
            if (r && r.revocation_type === 'FAMILY_REVOKE') return ['Family Sharing ended', 'bad', 'Family Sharing of the purchase ended for this member'];
            if (r && r.revocation_type === 'REFUND_PRORATED') {
              const share = r.revocation_percentage != null ? ' ' + percent(r.revocation_percentage) : '';
              return ['Partly refunded' + share, 'bad', 'the purchase was partly refunded' + (share ? ' (' + share.trim() + ')' : '')];
            }
            return ['Refunded', 'bad', 'the purchase was refunded'];
          }
          function statusOf(entitlement, transactions) {
            if (entitlement.active && entitlement.in_grace_period) return ['Grace period', 'warn'];
            if (entitlement.active) return ['Active', 'ok'];
            const speaking = transactions.find((t) => t.original_transaction_id === entitlement.original_transaction_id &&
              t.product_id === entitlement.product_id && t.revoked_at);
            if (speaking) return revokedLabel(speaking.transaction_id);
            const latest = transactions.filter((t) => t.original_transaction_id === entitlement.original_transaction_id)
              .sort((a, b) => (b.purchase_date || '').localeCompare(a.purchase_date || ''))[0];
            if (latest && latest.state === 'on_hold') {
              return ['Account hold', 'warn', 'on account hold while Google Play retries the payment'];
            }
            if (latest && latest.state === 'paused') return ['Paused', 'off', 'the customer paused the subscription'];
            return ['Expired', 'off'];
          }

          function summarize(entitlements, transactions, consumables, entries) {
            if (entitlements.length === 0) {
              const units = consumables.reduce((sum, c) => sum + c.count, 0);
              if (units > 0) return 'No entitlement. ' + units + ' consumable unit(s) bought.';
              const newest = entries.find((e) => e.kind === 'verdict');
              if (newest && newest.belongs_to_another_account) {
                return 'No entitlement: the purchase this account sent belongs to another account' +
                  (newest.owner_account_id ? ' (' + newest.owner_account_id + ').' : '.');
              }
              if (newest && newest.outcome !== 'granted' && newest.outcome !== 'already_granted') {
                return 'No entitlement: the newest verdict was ' + newest.outcome + (newest.reason ? ' (' + newest.reason + ')' : '') +
                  '. ' + (newest.explanation || '');
              }
              return 'No entitlement: no verdict granting one has been read for this account.';
            }
            const ordered = entitlements.slice().sort((a, b) => (b.active ? 1 : 0) - (a.active ? 1 : 0));
            const parts = ordered.map((e) => {
              if (e.active && e.in_grace_period) return e.id + ' is active in a billing grace period until ' + day(e.expires_at);
              if (e.active) return e.id + ' is active' + (e.expires_at ? ' until ' + day(e.expires_at) : ' (does not expire)');
              const status = statusOf(e, transactions);
              if (status.length === 3) return e.id + ' is not active: ' + status[2];
              return e.id + ' is not active: it expired on ' + day(e.expires_at);
            });
            return parts.join('. ') + '.';
          }

          function renderPills(entitlements, transactions) {
            const pills = $('pills');
            pills.replaceChildren();
            for (const e of entitlements.slice().sort((a, b) => (b.active ? 1 : 0) - (a.active ? 1 : 0))) {
              const [label, kind] = statusOf(e, transactions);
              const pill = el('span', 'pill ' + kind, e.id + ' · ' + label);
              if (e.active) pill.appendChild(el('span', 'detail', e.expires_at ? 'until ' + day(e.expires_at) : 'no expiry'));
              pills.appendChild(pill);
            }
            pills.hidden = entitlements.length === 0;
          }

          function renderEntitlements(body, transactions) {
            const tbody = $('entitlements').querySelector('tbody');
            tbody.replaceChildren();
            for (const e of body.entitlements) {
              const row = el('tr');
              cell(row, e.id).className = 'mono';
              const [label, kind] = statusOf(e, transactions);
              cell(row, badge(label, kind));
              cell(row, e.product_id, 'mono');
              cell(row, e.expires_at ? when(e.expires_at) : 'never');
              cell(row, e.original_transaction_id, 'mono');
              cell(row, e.environment);
              cell(row, storeBadge(e.store));
              tbody.appendChild(row);
            }
            $('entitlements').hidden = body.entitlements.length === 0;
            $('no-entitlements').hidden = body.entitlements.length !== 0;
            const ctbody = $('consumables').querySelector('tbody');
            ctbody.replaceChildren();
            for (const c of body.consumables) {
              const row = el('tr');
              cell(row, c.product_id, 'mono');
              cell(row, c.count);
              cell(row, storeBadge(c.store));
              ctbody.appendChild(row);
            }
            $('consumables-block').hidden = body.consumables.length === 0;
          }

          const stateBadges = { active: ['Active', 'ok'], expired: ['Expired', 'off'], revoked: ['Refunded', 'bad'], consumed: ['Consumed', 'info'],
            on_hold: ['Account hold', 'warn'], paused: ['Paused', 'off'] };
          function renderTransactions(transactions) {
            const tbody = $('transactions').querySelector('tbody');
            tbody.replaceChildren();
            for (const t of transactions) {
              const row = el('tr');
              const id = cell(row, t.transaction_id, 'mono');
              if (t.original_transaction_id !== t.transaction_id) {
                id.appendChild(el('div', 'muted small', 'of ' + t.original_transaction_id));
              }
              if (t.order_id && t.order_id !== t.transaction_id) id.appendChild(el('div', 'muted small', 'order ' + t.order_id));
              cell(row, t.product_id, 'mono');
              const [label, kind] = t.state === 'revoked' ? revokedLabel(t.transaction_id) : (stateBadges[t.state] || [t.state, 'off']);
              const stateCell = cell(row, badge(t.in_grace_period ? 'Grace period' : label, t.in_grace_period ? 'warn' : kind));
              if (t.quantity > 1) stateCell.appendChild(el('div', 'muted small', '× ' + t.quantity));
              cell(row, when(t.purchase_date));
              cell(row, t.expires_date ? when(t.expires_date) : '—');
              cell(row, t.revoked_at ? when(t.revoked_at) : '—');
              cell(row, storeBadge(t.store));
              tbody.appendChild(row);
            }
            $('transactions').hidden = transactions.length === 0;
            $('no-transactions').hidden = transactions.length !== 0;
          }

          const outcomeBadges = {
            granted: ['Granted', 'ok'], already_granted: ['Already owned', 'info'], rejected: ['Rejected', 'bad'],
            unverifiable: ['Unverifiable', 'warn'],
          };
          const eventBadges = {
            initial_purchase: ['Purchase', 'ok'], renewal: ['Renewal', 'ok'], expiration: ['Expiration', 'off'],
            billing_issue: ['Billing issue', 'warn'], grace_period_entered: ['Grace period', 'warn'], refund: ['Refund', 'bad'],
            refund_reversed: ['Refund reversed', 'ok'], transfer: ['Transfer', 'info'], product_change: ['Product change', 'info'],
            renewal_extended: ['Renewal extended', 'ok'],
          };
          function renderHistory(entries, append) {
            const list = $('timeline');
            if (!append) list.replaceChildren();
            for (const entry of entries) {
              const item = el('li');
              item.appendChild(el('div', 'when', when(entry.occurred_at || entry.recorded_at)));
              const kindCell = el('div');
              const body = el('div');
              if (entry.kind === 'event' && entry.event) {
                const [label, kind] = eventBadges[entry.event.type] || [entry.event.type, 'info'];
                kindCell.appendChild(badge(label, kind));
                body.appendChild(el('div', 'what', entry.explanation));
                let meta = 'entitlement ' + entry.event.entitlement_id + ' · ' + (entry.event.active ? 'now active' : 'now inactive') +
                  ' · transaction ' + entry.event.transaction_id;
                if (entry.event.type === 'transfer') meta += ' · from ' + entry.event.from_account_id + ' to ' + entry.event.to_account_id;
                body.appendChild(el('div', 'meta mono', meta));
              } else if (entry.kind === 'ignored') {
                kindCell.appendChild(badge('Ignored', 'warn'));
                body.appendChild(el('div', 'what', entry.explanation));
                body.appendChild(el('div', 'meta mono', entry.problem || ''));
              } else {
                const [label, kind] = outcomeBadges[entry.outcome] || [entry.outcome, 'off'];
                kindCell.appendChild(badge(label, kind));
                if (entry.reason) kindCell.appendChild(el('div', 'meta mono', entry.reason));
                body.appendChild(el('div', 'what', entry.explanation));
                if (entry.belongs_to_another_account) {
                  body.appendChild(el('div', 'what owner', entry.owner_account_id
                    ? 'This purchase belongs to another account: ' + entry.owner_account_id + '.'
                    : 'This purchase belongs to another account (its id is shown to support staff only).'));
                }
                const products = (entry.transactions || []).map((t) => t.product_id + ' ' + t.transaction_id).join(', ');
                let meta = 'verdict ' + entry.verdict_id + ' · ' + storeName(entry.store) + ' · decided by ' + entry.decided_by;
                if (products) meta += ' · ' + products;
                body.appendChild(el('div', 'meta mono', meta));
                if (entry.effect === 'stale') body.appendChild(el('div', 'meta', 'Read after a newer verdict: it changed nothing.'));
                const notes = (entry.notes || []).filter((n) => n);
                if (notes.length) {
                  const ul = el('ul', 'notes');
                  for (const note of notes) ul.appendChild(el('li', null, note));
                  body.appendChild(ul);
                }
              }
              item.appendChild(kindCell);
              item.appendChild(body);
              list.appendChild(item);
            }
          }

          async function lookup(query) {
            query = query.trim();
            if (!query) return;
            setStatus('Looking up ' + query + '…');
            $('result').hidden = true;
            let account = query;
            let note = null;
            const byTransaction = await api('/v1/transactions/' + encodeURIComponent(query));
            if (!token) return;
            if (byTransaction.status === 200) {
              account = byTransaction.body.account_id;
              const matchedNames = { transaction_id: 'Transaction ', original_transaction_id: 'Original transaction ',
                order_id: 'Order ', purchase_token: 'Purchase token ' };
              note = (matchedNames[byTransaction.body.matched_by] || 'Transaction ') + query +
                ' belongs to this account (' + byTransaction.body.state + ').';
            } else if (byTransaction.status === 400) {
              setStatus(byTransaction.body ? byTransaction.body.message : 'That id cannot be looked up.', true);
              return;
            }
            const path = '/v1/accounts/' + encodeURIComponent(account);
            const entitlements = await api(path + '/entitlements');
            if (!token) return;
            if (entitlements.status === 404) {
              setStatus('Nothing found for “' + query + '”: no verdict read so far names this account or transaction.', true);
              return;
            }
            if (entitlements.status !== 200) {
              setStatus((entitlements.body && entitlements.body.message) || 'The service did not answer. Try again.', true);
              return;
            }
            const transactions = await api(path + '/transactions');
            const timeline = await api(path + '/history?limit=30');
            if (transactions.status !== 200 || timeline.status !== 200) {
              setStatus('The service did not answer in full. Try again.', true);
              return;
            }
            current = { account: account, nextBefore: timeline.body.next_before };
            $('account-id').textContent = account;
            const asOf = entitlements.body.as_of;
            $('as-of').textContent = asOf ? 'Projection has read verdicts up to ' + when(asOf) : 'No verdict read yet';
            const list = transactions.body.transactions;
            revocations = {};
            collectRevocations(timeline.body.entries);
            $('summary').textContent = summarize(entitlements.body.entitlements, list, entitlements.body.consumables,
              timeline.body.entries);
            renderPills(entitlements.body.entitlements, list);
            $('match-note').textContent = note || '';
            $('match-note').hidden = !note;
            renderEntitlements(entitlements.body, list);
            renderTransactions(list);
            renderHistory(timeline.body.entries, false);
            $('more').hidden = !current.nextBefore;
            $('result').hidden = false;
            setStatus('');
            window.history.replaceState(null, '', '#q=' + encodeURIComponent(query));
          }

          async function more() {
            if (!current || !current.nextBefore) return;
            const page = await api('/v1/accounts/' + encodeURIComponent(current.account) + '/history?limit=30&before=' + current.nextBefore);
            if (page.status !== 200) { setStatus('Older entries could not be loaded.', true); return; }
            current.nextBefore = page.body.next_before;
            renderHistory(page.body.entries, true);
            $('more').hidden = !current.nextBefore;
          }

          document.addEventListener('DOMContentLoaded', function () {
            $('login-form').addEventListener('submit', function (event) {
              event.preventDefault();
              startSession($('token').value.trim(), true);
              $('token').value = '';
            });
            $('search').addEventListener('submit', function (event) {
              event.preventDefault();
              lookup($('query').value);
            });
            $('logout').addEventListener('click', function () { signOut(''); });
            $('more').addEventListener('click', more);
            if (token) startSession(token, false); else showLogin('');
          });
        })();
        """#
}
