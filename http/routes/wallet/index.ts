import type { RouteDef } from '../../route.ts';
import { getWallet } from './get.ts';
import { updateWallet } from './update.ts';
import { createWalletTopUp } from './top-ups-create.ts';
import { listWalletTransactions } from './transactions.ts';
import { listWalletDeposits } from './deposits.ts';

export const walletRoutes: RouteDef[] = [getWallet, updateWallet, createWalletTopUp, listWalletTransactions, listWalletDeposits];
