-- The commands of the spd plugin (:help spd).  Nothing connects until one
-- of them runs or require('spd').setup() is called.
if vim.g.loaded_spd then
  return
end
vim.g.loaded_spd = true

local cmd = vim.api.nvim_create_user_command

cmd('SpdApprovals', function()
  require('spd.approvals').open()
end, { desc = 'spd: pending approvals' })

local function approval_id(s)
  local id = tonumber(s)
  if not id or id <= 0 or id ~= math.floor(id) then
    require('spd.util').notify('not an approval number: ' .. require('spd.termsafe').field(s), vim.log.levels.ERROR)
    return nil
  end
  return id
end

cmd('SpdApprove', function(o)
  local id = approval_id(o.fargs[1])
  if id then
    require('spd.approvals').decide(id, true)
  end
end, { nargs = 1, desc = 'spd: grant approval N' })

cmd('SpdDeny', function(o)
  local n, why = o.args:match('^%s*(%S+)%s*(.-)%s*$')
  local id = approval_id(n or '')
  if id then
    require('spd.approvals').decide(id, false, why)
  end
end, { nargs = '+', desc = 'spd: refuse approval N [why]' })

cmd('SpdRun', function(o)
  require('spd.run').command(o.args)
end, { nargs = '+', complete = 'shellcmd', desc = 'spd: run a command in the sandbox' })

cmd('SpdSessions', function()
  require('spd.sessions').open()
end, { desc = 'spd: sessions' })

cmd('SpdJournal', function(o)
  require('spd.journal').open(o.args)
end, { nargs = '?', desc = 'spd: follow the journal [kind]' })

cmd('SpdStatus', function()
  require('spd').status()
end, { desc = "spd: spd's status" })
