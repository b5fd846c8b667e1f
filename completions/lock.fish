# fish completion for lock(1)

# Prints the position (in `commandline -opc`) of the prefix, once it has been typed: the first
# word that is not an option, or the word after "--". Fails while options may still come.
function __fish_lock_prefix_index
    set -l value_flags n name monitor-retry timeout try conflict-exit-code lost-exit-code min-hold \
        check check-interval check-failures metrics-file kill-after ready backend state-dir http-addr \
        token token-file ca-file ca-path client-cert client-key tls-server-name datacenter \
        endpoints session-ttl lock-delay session-checks value
    set -l words (commandline -opc)
    set -l skip 0
    for i in (seq 2 (count $words))
        set -l w $words[$i]
        if test $skip = 1
            set skip 0
        else if test "$w" = --
            set -l next (math $i + 1)
            test $next -le (count $words); and echo $next; and return 0
            return 1
        else if string match -qr -- '^-.' $w
            set -l name (string replace -r -- '^--?' '' $w)
            if not string match -q -- '*=*' $name; and contains -- $name $value_flags
                set skip 1
            end
        else
            echo $i
            return 0
        end
    end
    return 1
end

# Completes the child's command line: the words after the prefix (and a "--" right after it).
function __fish_lock_child
    set -l prefix (__fish_lock_prefix_index); or return
    set -l words (commandline -opc)
    set -l child $words[(math $prefix + 1)..-1]
    test "$child[1]" = --; and set -e child[1]
    if set -q child[1]
        __fish_complete_subcommand --commandline $child (commandline -ct)
    else
        __fish_complete_command
    end
end

set -l options 'not __fish_lock_prefix_index >/dev/null'
set -l durations '1s 5s 30s 5m 1h'

complete -c lock -f
complete -c lock -n '__fish_lock_prefix_index >/dev/null' -a '(__fish_lock_child)'

complete -c lock -n $options -o n -x -d 'Limit of lock holders; above 1 the lock is a semaphore'
complete -c lock -n $options -o name -x -d 'Name of the session'
complete -c lock -n $options -o monitor-retry -x -d 'Attempts a failed lease renewal is sure to get'
complete -c lock -n $options -o timeout -x -a $durations -d 'Maximum time to wait for the lock'
complete -c lock -n $options -o try -x -a $durations -d 'Maximum time to wait for the lock'
complete -c lock -n $options -o shell -d 'Run the child with $SHELL -c (default true)'
complete -c lock -n $options -o pass-stdin -d 'Give the child our stdin'
complete -c lock -n $options -o child-exit-code -d 'Exit 2 if the child exited with an error'
complete -c lock -n $options -o preserve-status -d "Exit with the child's own status"
complete -c lock -n $options -o conflict-exit-code -x -d 'Exit status when -timeout passes without the lock'
complete -c lock -n $options -o lost-exit-code -x -d 'Exit status when the lock is lost'
complete -c lock -n $options -o min-hold -x -a $durations -d 'Keep the lock at least this long'
complete -c lock -n $options -o check -x -a '(__fish_complete_command)' -d 'Health check: run this every -check-interval while the child runs'
complete -c lock -n $options -o check-interval -x -a $durations -d 'Time between health checks, and the most one may take'
complete -c lock -n $options -o check-failures -x -d 'Health checks failed in a row that give the lock up'
complete -c lock -n $options -o metrics-file -r -F -d "Write the run's outcome and timings there, for node_exporter"
complete -c lock -n $options -o kill-after -x -a $durations -d 'Time between SIGTERM and SIGKILL'
complete -c lock -n $options -o verbose -d 'Say what lock is doing, on stderr'
complete -c lock -n $options -o ready -x -a 'hold wait' -d 'When to tell systemd the unit is ready'
complete -c lock -n $options -o backend -x -a 'local consul etcd zookeeper postgres' -d 'Where the lock lives'
complete -c lock -n $options -o state-dir -x -a '(__fish_complete_directories)' -d "Directory of the local backend's lock files"
complete -c lock -n $options -o status -d 'Show who holds the prefix, and exit'
complete -c lock -n $options -o json -d 'With -status, print JSON'
complete -c lock -n $options -o watch -d 'With -status, print again at every change'
complete -c lock -n $options -o version -d 'Print the version and exit'
complete -c lock -n $options -o h -o help -d 'Print the usage and exit'
complete -c lock -n $options -o http-addr -x -d 'Address of the Consul agent'
complete -c lock -n $options -o token -x -d 'ACL token to use in the request'
complete -c lock -n $options -o token-file -r -F -d 'File containing the ACL token'
complete -c lock -n $options -o ca-file -r -F -d 'CA file for TLS'
complete -c lock -n $options -o ca-path -x -a '(__fish_complete_directories)' -d 'Directory of CA certificates for TLS'
complete -c lock -n $options -o client-cert -r -F -d 'Client certificate for TLS'
complete -c lock -n $options -o client-key -r -F -d 'Client key for TLS'
complete -c lock -n $options -o tls-server-name -x -d 'Server name to use as the SNI host for TLS'
complete -c lock -n $options -o datacenter -x -d 'Datacenter to query'
complete -c lock -n $options -o stale -d 'Let any Consul server answer reads'
complete -c lock -n $options -o endpoints -x -d 'etcd URLs, a ZooKeeper connect string, or a PostgreSQL connection string'
complete -c lock -n $options -o session-ttl -x -a $durations -d 'TTL of the session or lease'
complete -c lock -n $options -o lock-delay -x -a $durations -d "Consul's lock-delay"
complete -c lock -n $options -o session-checks -x -d "Consul agent checks the session is tied to"
complete -c lock -n $options -o value -x -d 'Value stored with the hold'
