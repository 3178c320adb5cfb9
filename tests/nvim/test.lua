-- The Neovim plugin against a real spd, headless.  Started by tests/nvim/run
-- (which sets SPD_CONFIG_DIR, SPD_STATE_DIR, SPD_RUNTIME_DIR and the
-- NVIM_TEST_* variables); spd itself is started and restarted from here.
-- Writes one "PASS name", "FAIL name: why" or "SKIP name: why" line per
-- test to $NVIM_TEST_RESULTS.

local uv = vim.uv or vim.loop
local env = vim.env
local BUILD = env.NVIM_TEST_BUILD
local SPCTL = BUILD .. '/spctl'
local REPO = env.NVIM_TEST_REPO
local RT = env.SPD_RUNTIME_DIR
local results = assert(io.open(env.NVIM_TEST_RESULTS, 'w'))

-- Every wait is bounded so that a broken plugin fails instead of hanging;
-- none of them is an assertion about speed.
local WAIT_MS = 15000

local function report(line)
  results:write(line .. '\n')
  results:flush()
end

local function wait(cond, ms)
  return vim.wait(ms or WAIT_MS, cond, 20)
end

-- What the plugin told the user.
local notes = {}
vim.notify = function(msg, level)
  notes[#notes + 1] = { msg = msg, level = level }
end
local function note_matching(pat, from)
  for i = from or 1, #notes do
    if notes[i].msg:find(pat, 1, true) then
      return notes[i]
    end
  end
  return nil
end

-- Prompts answered as a person would in each test.
local input_answer = nil
vim.ui.input = function(_, cb)
  cb(input_answer)
end
vim.ui.select = function(items, _, cb)
  cb(items[1], 1)
end

-- ---- spd -----------------------------------------------------------------

local spd_job = nil

local function read_file(p)
  local f = io.open(p, 'r')
  if not f then
    return nil
  end
  local s = f:read('*a')
  f:close()
  return s
end

local function spd_pid()
  return tonumber((read_file(RT .. '/spd.pid') or ''):match('%d+'))
end

local function socket_answers()
  local p = uv.new_pipe(false)
  local done, ok = false, false
  p:connect(RT .. '/spd.sock', function(err)
    ok = err == nil
    done = true
  end)
  wait(function()
    return done
  end, 2000)
  p:close()
  return ok
end

local function start_spd()
  local old = spd_pid()
  spd_job = vim.fn.jobstart({ BUILD .. '/spd', '--foreground' }, {
    on_stderr = function() end,
  })
  assert(spd_job > 0, 'cannot start spd')
  assert(
    wait(function()
      local p = spd_pid()
      return p ~= nil and p ~= old and socket_answers()
    end),
    'spd did not come up'
  )
end

local function stop_spd()
  local pid = spd_pid()
  if pid then
    uv.kill(pid, 'sigterm')
  end
  if spd_job then
    vim.fn.jobwait({ spd_job }, 10000)
    spd_job = nil
  end
end

-- ---- helpers -------------------------------------------------------------

local function spctl_json(args)
  local cmd = { SPCTL, '--json' }
  vim.list_extend(cmd, args)
  local out = vim.fn.system(cmd)
  assert(vim.v.shell_error == 0, table.concat(args, ' ') .. ' failed: ' .. out)
  return vim.json.decode(out)
end

local function start_session(feature)
  local s = spctl_json({ 'session', 'start', feature, '--repo', REPO })
  assert(type(s.token) == 'string', 'no session token')
  return s
end

-- An agent's `spctl run -- argv` with the session's token, in the
-- background: returns a handle whose code is set when it exits.
local function agent_run(token, argv)
  local h = { out = '', err = '' }
  local cmd = { SPCTL, 'run', '--' }
  vim.list_extend(cmd, argv)
  h.job = vim.fn.jobstart(cmd, {
    env = { SPD_SESSION_TOKEN = token },
    stdout_buffered = true,
    stderr_buffered = true,
    on_stdout = function(_, d)
      h.out = table.concat(d, '\n')
    end,
    on_stderr = function(_, d)
      h.err = table.concat(d, '\n')
    end,
    on_exit = function(_, c)
      h.code = c
    end,
  })
  assert(h.job > 0, 'cannot start spctl')
  return h
end

local function exited(h)
  assert(
    wait(function()
      return h.code ~= nil
    end),
    'the agent run did not end'
  )
end

local approvals = require('spd.approvals')
local util = require('spd.util')

-- The pending ask whose argv[3] is s, waiting until it arrives.
local function ask_for(s)
  local found = nil
  wait(function()
    for id, a in pairs(approvals.pending) do
      if type(a.object) == 'table' and type(a.object.argv) == 'table' and a.object.argv[3] == s then
        found = id
        return true
      end
    end
    return false
  end)
  assert(found, 'the ask for ' .. s .. ' never reached the plugin')
  return found
end

local function buf_lines(b)
  return vim.api.nvim_buf_get_lines(b, 0, -1, false)
end

local function buf_text(b)
  return table.concat(buf_lines(b), '\n')
end

-- Put the cursor on the line of buffer b (shown in the current window)
-- that starts with prefix.
local function cursor_to(b, prefix)
  local line = nil
  wait(function()
    for i, l in ipairs(buf_lines(b)) do
      if l:sub(1, #prefix) == prefix then
        line = i
        return true
      end
    end
    return false
  end)
  assert(line, 'no line "' .. prefix .. '" in ' .. vim.api.nvim_buf_get_name(b))
  vim.api.nvim_set_current_buf(b)
  vim.api.nvim_win_set_cursor(0, { line, 0 })
end

local function approvals_buf()
  return util.find(approvals.NAME)
end

local function test(name, f)
  local ok, err = xpcall(f, debug.traceback)
  if ok then
    report('PASS ' .. name)
  else
    report('FAIL ' .. name .. ': ' .. tostring(err):gsub('\n', ' | '))
  end
end

-- ---- the tests -------------------------------------------------------------

local ok_start, start_err = pcall(start_spd)
if not ok_start then
  report('FAIL setup: ' .. tostring(start_err))
  vim.cmd('qall!')
end

vim.cmd('cd ' .. vim.fn.fnameescape(REPO))
local spd = require('spd')
spd.setup({ reconnect_max_ms = 500 })
local S1

test('connect', function()
  assert(
    wait(function()
      return approvals.connected
    end),
    'the approvals watch never connected: ' .. tostring(approvals.last_error)
  )
  local res = nil
  spd.status(function(err, r)
    res = err or r
  end)
  assert(
    wait(function()
      return res ~= nil
    end),
    'no answer to daemon.status'
  )
  assert(res.pid == spd_pid(), ':SpdStatus did not show spd: ' .. vim.inspect(res))
  assert(note_matching('spd 0.') or note_matching('spd ' .. tostring(res.version)), 'no status shown')
end)

local first = nil
test('ask-notified-while-hidden', function()
  S1 = start_session('nvim-one')
  local n = #notes
  first = { h = agent_run(S1.token, { 'sh', '-c', 'echo approved-ran' }) }
  first.id = ask_for('echo approved-ran')
  local note = note_matching('approval ' .. first.id, n + 1)
  assert(note, 'no notification for the ask while :SpdApprovals was hidden')
  assert(note.msg:find('ask.shell', 1, true), 'the notification does not say the rule: ' .. note.msg)
  assert(note.msg:find("run: sh -c 'echo approved-ran'", 1, true), 'the notification does not show the argv: ' .. note.msg)
end)

test('approve-from-buffer', function()
  assert(first and first.id, 'no ask to approve')
  vim.cmd('SpdApprovals')
  local b = approvals_buf()
  assert(b, ':SpdApprovals made no buffer')
  cursor_to(b, 'approval ' .. first.id .. ' ')
  assert(buf_text(b):find("run: sh -c 'echo approved-ran'", 1, true), 'the buffer does not show the argv')
  vim.cmd('normal a')
  exited(first.h)
  assert(first.h.code == 0, 'the approved run failed: ' .. first.h.err)
  assert(first.h.out:find('approved-ran', 1, true), 'the approved run printed nothing: ' .. first.h.out)
  assert(
    wait(function()
      return not buf_text(b):find('approval ' .. first.id .. ' ', 1, true)
    end),
    'the decided ask is still listed'
  )
end)

test('deny-from-buffer', function()
  local h = agent_run(S1.token, { 'sh', '-c', 'echo must-not-run' })
  local id = ask_for('echo must-not-run')
  local b = approvals_buf()
  cursor_to(b, 'approval ' .. id .. ' ')
  input_answer = 'not today'
  vim.cmd('normal d')
  input_answer = nil
  exited(h)
  assert(h.code ~= 0, 'the denied run succeeded')
  assert(h.err:find('APPROVAL-REFUSED', 1, true), 'the denied run did not fail with APPROVAL-REFUSED: ' .. h.err)
  assert(h.err:find('not today', 1, true), 'the reason did not reach the agent: ' .. h.err)
  assert(not h.out:find('must-not-run', 1, true), 'the denied command ran')
end)

test('approve-deny-commands', function()
  local h = agent_run(S1.token, { 'sh', '-c', 'echo by-command' })
  local id = ask_for('echo by-command')
  vim.cmd('SpdApprove ' .. id)
  exited(h)
  assert(h.code == 0 and h.out:find('by-command', 1, true), ':SpdApprove did not let the run complete: ' .. h.err)
  h = agent_run(S1.token, { 'sh', '-c', 'echo denied-by-command' })
  id = ask_for('echo denied-by-command')
  vim.cmd('SpdDeny ' .. id .. ' too risky')
  exited(h)
  assert(h.code ~= 0 and h.err:find('APPROVAL-REFUSED', 1, true), ':SpdDeny did not refuse: ' .. h.err)
  assert(h.err:find('too risky', 1, true), 'the reason did not reach the agent: ' .. h.err)
end)

-- An ask decided outside the editor (spctl approve, spctl deny) leaves
-- the plugin's list and buffer as soon as spd says so.
test('decided-elsewhere-dropped', function()
  vim.cmd('SpdApprovals')
  local b = approvals_buf()
  for _, verb in ipairs({ 'approve', 'deny' }) do
    local h = agent_run(S1.token, { 'sh', '-c', 'echo ' .. verb .. '-from-shell' })
    local id = ask_for('echo ' .. verb .. '-from-shell')
    cursor_to(b, 'approval ' .. id .. ' ')
    local out = vim.fn.system({ SPCTL, verb, tostring(id) })
    assert(vim.v.shell_error == 0, 'spctl ' .. verb .. ' failed: ' .. out)
    assert(
      wait(function()
        return approvals.pending[id] == nil and not buf_text(b):find('approval ' .. id .. ' ', 1, true)
      end),
      'the ask decided by spctl ' .. verb .. ' is still listed:\n' .. buf_text(b)
    )
    exited(h)
  end
end)

test('argv-escaped', function()
  local ESC_ARG = 'esc\27]52;c;ZXZpbA==\7'
  local BIDI_ARG = 'bidi\226\128\174txt' -- U+202E
  local ZW_ARG = 'zw\226\128\139x' -- U+200B
  local LS_ARG = 'ls\226\128\168x' -- U+2028
  local C1_ARG = 'c1\194\155x' -- U+009B, CSI
  local h = agent_run(S1.token, { 'sh', '-c', 'echo escaped-argv', ESC_ARG, BIDI_ARG, ZW_ARG, LS_ARG, C1_ARG })
  local id = ask_for('echo escaped-argv')
  local b = approvals_buf()
  cursor_to(b, 'approval ' .. id .. ' ')
  local text = buf_text(b)
  for _, bad in ipairs({ '\27', '\7', '\226\128\174', '\226\128\139', '\226\128\168', '\194\155' }) do
    assert(not text:find(bad, 1, true), 'a raw control character reached the buffer: ' .. vim.inspect(bad))
  end
  local want = "run: sh -c 'echo escaped-argv' $'esc\\e]52;c;ZXZpbA==\\x07' $'bidi\\u202etxt' $'zw\\u200bx' $'ls\\u2028x' $'c1\\u009bx'"
  assert(text:find(want, 1, true), 'the argv is not shown shell-quoted and escaped:\n' .. text)
  vim.cmd('SpdDeny ' .. id)
  exited(h)
end)

local function run_buf_status(b)
  return vim.b[b].spd_run_status
end

-- spd's redactor holds back the tail of a run's output while it could be
-- the start of a secret's form until more output or the end comes (on a
-- host whose environment has AWS_CA_BUNDLE=/etc/ssl/certs/..., "first\n"
-- is held: it can begin one of that value's forms); a run of more than
-- REDACT_WS_RUN_MAX (16) blanks ends any partial match, so the lines a
-- test waits for are followed by one.
local FLUSH = [[printf "%20s\n" ""]]

test('connect-ask-shown', function()
  -- A proxy run's ask-host connection (proto/PROTOCOL.md, approval.list).
  local lines = approvals.object_lines({ kind = 'connect', host = 'github.com', port = 443, net = 'proxy' }, '  ')
  assert(lines[1] == "  connect github.com port 443, through the run's network proxy", vim.inspect(lines))
end)

test('run-streams', function()
  os.remove(REPO .. '/go')
  vim.cmd([[SpdRun sh -c 'echo first; printf "\033[31mred\n"; ]] .. FLUSH .. [[; while [ ! -e go ]; do sleep 0.05; done; echo second']])
  local b = vim.api.nvim_get_current_buf()
  assert(vim.api.nvim_buf_get_name(b):find('spd://run/', 1, true), ':SpdRun opened no run buffer')
  assert(
    wait(function()
      return buf_text(b):find('\nfirst\n', 1, true) ~= nil
    end),
    'the first line never streamed in:\n' .. buf_text(b)
  )
  assert(run_buf_status(b) == 'running', 'the run ended before it was told to: ' .. tostring(run_buf_status(b)))
  assert(not buf_text(b):find('\nsecond\n', 1, true), 'second printed before go existed')
  local f = assert(io.open(REPO .. '/go', 'w'))
  f:close()
  assert(
    wait(function()
      return run_buf_status(b) ~= 'running'
    end),
    'the run never ended'
  )
  os.remove(REPO .. '/go')
  local text = buf_text(b)
  assert(run_buf_status(b):find('^exit 0'), 'the run did not exit 0: ' .. run_buf_status(b) .. '\n' .. text)
  assert(text:find('\nsecond\n', 1, true), 'the rest of the output is missing:\n' .. text)
  assert(text:find('^[[31mred', 1, true), 'the escape sequence is not shown in caret notation:\n' .. text)
  assert(not text:find('\27', 1, true), 'a raw ESC reached the run buffer')
end)

local function sleeper_alive(marker)
  for _, name in ipairs(vim.fn.readdir('/proc')) do
    if name:match('^%d+$') then
      local c = read_file('/proc/' .. name .. '/cmdline')
      if c and c:find(marker, 1, true) then
        return true
      end
    end
  end
  return false
end

test('run-cancel', function()
  local marker = '37.25'
  vim.cmd([[SpdRun sh -c 'echo started; ]] .. FLUSH .. [[; exec sleep ]] .. marker .. "'")
  local b = vim.api.nvim_get_current_buf()
  assert(
    wait(function()
      return buf_text(b):find('\nstarted', 1, true) ~= nil
    end),
    'the run never started:\n' .. buf_text(b)
  )
  assert(sleeper_alive('sleep\0' .. marker), 'the sleeping run is not visible in /proc')
  vim.cmd('exe "normal \\<C-c>"')
  assert(run_buf_status(b) == 'cancelled', '<C-c> did not cancel: ' .. tostring(run_buf_status(b)))
  assert(
    wait(function()
      return not sleeper_alive('sleep\0' .. marker)
    end),
    'the cancelled run is still alive'
  )
end)

test('sessions', function()
  local h = agent_run(S1.token, { 'cp', 'README', 'COPIED' })
  exited(h)
  assert(h.code == 0, 'the agent could not copy a file: ' .. h.err)
  vim.cmd('SpdSessions')
  local b = util.find('spd://sessions')
  assert(b, ':SpdSessions made no buffer')
  cursor_to(b, S1.id)
  assert(buf_text(b):find('nvim-one', 1, true), 'the session list does not show the feature')
  vim.cmd('normal D')
  local d = nil
  assert(
    wait(function()
      d = util.find('spd://session/' .. S1.id .. '/diff')
      return d ~= nil
    end),
    'no diff buffer'
  )
  assert(vim.api.nvim_buf_get_option(d, 'filetype') == 'diff', 'the diff buffer is not a diff')
  assert(buf_text(d):find('+++ b/COPIED', 1, true), 'the diff does not show the new file:\n' .. buf_text(d))
  cursor_to(b, S1.id)
  vim.cmd('exe "normal \\<CR>"')
  local st = nil
  assert(
    wait(function()
      st = util.find('spd://session/' .. S1.id)
      return st ~= nil and buf_text(st):find('state: active', 1, true) ~= nil
    end),
    'no status buffer saying the session is active'
  )
  cursor_to(b, S1.id)
  vim.cmd('normal E')
  local res = nil
  assert(
    wait(function()
      res = nil
      spd.request('session.status', { id = S1.id }, function(err, r)
        res = err or r
      end)
      wait(function()
        return res ~= nil
      end, 2000)
      return type(res) == 'table' and res.state ~= nil and res.state ~= 'active'
    end),
    'E did not end the session: ' .. vim.inspect(res)
  )
end)

local journal_buf = nil
test('journal-follows', function()
  vim.cmd('SpdJournal')
  journal_buf = vim.api.nvim_get_current_buf()
  assert(
    wait(function()
      return buf_text(journal_buf):find('approval.granted', 1, true) ~= nil
    end),
    'the journal does not show the grants:\n' .. buf_text(journal_buf)
  )
  local s = start_session('nvim-journal')
  assert(
    wait(function()
      return buf_text(journal_buf):find('[session ' .. s.id .. ']', 1, true) ~= nil
    end),
    'a new event never arrived in the followed journal'
  )
  vim.cmd('SpdJournal approval.refused')
  local k = vim.api.nvim_get_current_buf()
  assert(
    wait(function()
      return #buf_lines(k) >= 3
    end),
    'the refusals never arrived'
  )
  for i, l in ipairs(buf_lines(k)) do
    assert(i == 1 or l:find('approval.refused', 1, true), 'an event of another kind: ' .. l)
  end
end)

test('reconnect-after-restart', function()
  local n = #notes
  stop_spd()
  assert(
    wait(function()
      return not approvals.connected
    end),
    'the plugin did not notice spd went away'
  )
  assert(note_matching('lost the connection', n + 1), 'the user was not told spd went away')
  start_spd()
  assert(
    wait(function()
      return approvals.connected
    end),
    'the plugin did not reconnect: ' .. tostring(approvals.last_error)
  )
  assert(note_matching('reconnected', n + 1), 'the user was not told of the reconnection')
  local s = start_session('nvim-two')
  local h = agent_run(s.token, { 'sh', '-c', 'echo after-restart' })
  local id = ask_for('echo after-restart')
  local b = approvals_buf()
  cursor_to(b, 'approval ' .. id .. ' ')
  vim.cmd('normal a')
  exited(h)
  assert(h.code == 0 and h.out:find('after-restart', 1, true), 'the run after the restart failed: ' .. h.err)
  if journal_buf then
    assert(
      wait(function()
        return buf_text(journal_buf):find('-- reconnected to spd', 1, true) ~= nil
      end),
      'the journal did not reconnect'
    )
  end
end)

test('wrong-token', function()
  local bad = env.NVIM_TEST_BASE .. '/bad.token'
  local f = assert(io.open(bad, 'w'))
  f:write(string.rep('0', 64) .. '\n')
  f:close()
  local n = #notes
  spd.setup({ token_file = bad })
  local res = nil
  spd.status(function(err, r)
    res = { err = err, r = r }
  end)
  assert(
    wait(function()
      return res ~= nil
    end),
    'no answer with a wrong token'
  )
  assert(res.err and require('spd.client').errcode(res.err) == 'UNAUTHORIZED', 'a wrong token was not refused: ' .. vim.inspect(res))
  local note = note_matching('refused the operator token in ' .. bad, n + 1)
  assert(note, 'no clear message for the wrong token: ' .. vim.inspect(vim.list_slice(notes, n + 1)))
  assert(note.level == vim.log.levels.ERROR, 'the message is not an error')
  assert(note.msg:find('UNAUTHORIZED', 1, true), 'the message does not name the error: ' .. note.msg)
  assert(not approvals.connected, 'the watch connected with a wrong token')
end)

-- The port of client/termsafe.c, on what the tests above do not reach:
-- chunks that split a character, runs of blanks, bytes that are not UTF-8.
test('termsafe-port', function()
  local ts = require('spd.termsafe')
  local f = ts.stream()
  -- U+202E split over three chunks, then C1 NEL (U+0085) split over two.
  local out = f:write('a\226') .. f:write('\128') .. f:write('\174b\194') .. f:write('\133c') .. f:finish()
  assert(out == 'a\\u202eb\\u0085c', 'split characters: ' .. vim.inspect(out))
  f = ts.stream()
  out = f:write(string.rep(' ', 200)) .. f:write(string.rep(' ', 100) .. 'x') .. f:finish()
  assert(out == string.rep(' ', 256) .. '\\{44 blanks elided}x', 'blanks in a stream: ' .. vim.inspect(out))
  assert(ts.field('a' .. string.rep(' ', 20) .. 'b') == 'a' .. string.rep(' ', 16) .. '\\{4 blanks elided}b', 'blanks in a field')
  -- A stray C1 byte is escaped; an overlong NUL (C0 80) is not decoded.
  assert(ts.field('x\155y') == 'x\\x9by', 'stray C1 byte: ' .. ts.field('x\155y'))
  assert(ts.field('\192\128') == '\192\\x80', 'overlong form: ' .. vim.inspect(ts.field('\192\128')))
  assert(ts.field('tab\there\\') == 'tab\\there\\\\', 'tab and backslash in a field')
  assert(ts.arg("it's") == "'it'\\''s'", 'a quote in an argument: ' .. ts.arg("it's"))
  assert(ts.arg('') == "''", 'an empty argument')
  assert(ts.arg("a'\27") == "$'a\\'\\e'", 'a quote in $\'...\': ' .. ts.arg("a'\27"))
  -- Tag characters (above U+FFFF) and the emoji selector U+FE0F.
  assert(ts.field('t\243\160\128\129') == 't\\U000e0001', 'a tag character')
  assert(ts.field('\226\157\164\239\184\143') == '\226\157\164\239\184\143', 'U+FE0F must pass')
end)

test('help-documents-everything', function()
  local doc = read_file(env.NVIM_TEST_ROOT .. '/editors/nvim/doc/spd.txt')
  assert(doc, 'no doc/spd.txt')
  local n = 0
  for name in pairs(vim.api.nvim_get_commands({})) do
    if name:match('^Spd') then
      n = n + 1
      assert(doc:find('*:' .. name .. '*', 1, true), ':help has no tag for :' .. name)
    end
  end
  assert(n >= 7, 'the plugin defines only ' .. n .. ' commands')
  for key in pairs(spd.config) do
    assert(doc:find('\n    ' .. key .. ' = '), ':help spd-config does not document ' .. key)
  end
end)

spd.disconnect()
stop_spd()
results:close()
vim.cmd('qall!')
